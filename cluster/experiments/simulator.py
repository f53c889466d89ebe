"""A discrete-event simulation of a spec, driving the master's own offer cycle.

Time is simulated, so a 10-minute, 48-node run or a 400-node trace takes seconds; the
same seed gives the same timeline. The offer cycle is the master's (`master.cycle`), on
the simulation's event heap: allocation rounds every `allocation_interval` and right
after resources are freed; each slave's free resources offered to one framework in
(weighted) DRF order, at most MAX_OFFERS_HELD to each; declined or unused resources
filtered for `refuse_seconds`; preemption's checks, holds and kills. Frameworks answer
at once (the live cluster adds latency), so none holds an offer between rounds and no
offer times out: each offer is answered as the round makes it (`ledger.Answer`), so a
slave declined whole is offered on down the order, and of one used in part only what is
used is booked; one that has nothing to run suppresses its offers, and revives them
when work comes.

For the paper's comparisons two policies change what the allocator *accounts*:

- `slots`: each node is cut into K slots and every task takes one slot, whatever it
  really needs (max-min fairness over slots, as Hadoop's Fair Scheduler and Quincy);
- `cpu`: only CPUs are accounted (memory is not), as CPU-only fair sharing.

Under both, a node can be oversubscribed in what it really has; its tasks then run
slower, by a factor fixed when each task starts (`slowdown`): CPUs shared linearly (twice
the work, half the speed each), but memory overcommitted means swapping, which is steep --
every 10% of memory over the node's costs SWAP_COST x 10% more time, more for tasks with
more memory than the node's average and less for those with less (see `swap_slowdown`).
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from cluster.experiments.ideal_timeline import ideal_of
from cluster.experiments.results import Results, Sample
from cluster.experiments.spec import Spec
from cluster.experiments.workload import Pending, Workload
from master.allocation.allocator import Allocator
from master.allocation.collector import PausedCollector
from master.allocation.planning import RunningTask
from master.allocation.sorter import Millis
from master.cycle import ROUND_BATCH, CycleConfig, OfferCycle, Wish
from protocol.wire.resources import CPUS, MEM, SCALE, Resources, add_millis, holds, sub_millis

SWAP_COST = 10.0  # memory overcommitted by x% slows tasks by SWAP_COST * x% (paging)
REPORTS = 1000  # progress is reported (and a stop looked for) this often in a run


@dataclass(slots=True)
class Running:
    framework: str
    slave: str
    task: Pending
    real: Resources  # what it really uses
    booked: Resources  # what the allocator accounts for it
    ends: float
    started: float = 0.0


def swap_slowdown(load: Resources, capacity: Resources, task: Resources, tasks: int) -> float:
    """How much slower `task` runs on a node holding `load` (of `tasks` tasks, itself
    included) of `capacity`: time-sharing for CPUs and other resources (linear); for
    memory, paging, SWAP_COST times steeper and felt by each task in proportion to its
    memory beside the node's average (the paper: "poor performance for all the high-memory
    tasks running there")."""
    factor = 1.0
    for r, have in capacity.items():
        if not have:
            continue
        over = load.get(r, 0.0) / have
        if over <= 1.0:
            continue
        if r == MEM:
            mean = load.get(MEM, 0.0) / max(1, tasks)
            weight = task.get(MEM, 0.0) / mean if mean else 1.0
            factor = max(factor, 1.0 + SWAP_COST * (over - 1.0) * weight)
        else:
            factor = max(factor, over)
    cpu = load.get(CPUS, 0.0) / capacity[CPUS] if capacity.get(CPUS) else 0.0
    if cpu > 1.0 and factor > cpu:  # both: short of CPU while swapping
        factor *= cpu
    return factor


class SimulatedBooks:
    """The simulation's books as the offer cycle reads them (`master.cycle.State`)."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim

    def offers_held(self) -> dict[str, int]:
        return {}  # (answered at once: nobody holds an offer between rounds)

    def outstanding(self) -> tuple[()]:
        return ()

    def wishes(self, now: float) -> Iterator[Wish]:
        """Each framework started, with what its workload still wants, as the allocator
        accounts it; in the order they came (the `fifo` ideal serves them so, as the
        allocator does)."""
        for name in self.sim.added:
            wish = self.wish(name, now)
            if wish is not None:
                yield wish

    def wish(self, framework_id: str, now: float) -> Wish | None:
        sim = self.sim
        if framework_id not in sim.added:
            return None
        demand = sim.workloads[framework_id].demand(now)
        booked = [(dict(sim.booked(r).millis), n) for r, n in demand]
        return Wish(framework_id, sim.frameworks[framework_id].role or framework_id, demand=booked)

    def running(self) -> Iterator[RunningTask]:
        for ref, r in self.sim.tasks.items():
            yield RunningTask(r.framework, str(ref), r.slave, dict(r.booked.millis), r.started)

    def task_live(self, framework_id: str, task_id: str) -> bool:
        return int(task_id) in self.sim.tasks


class Simulation:
    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        policy = spec.master.policy
        self._slot = Resources(slots=1)  # (see `booked`)
        self._node_slots = Resources(slots=spec.master.slots_per_node or 1)
        self._cpus: dict[Resources, Resources] = {}
        setting = spec.setting()  # (the spec read once: what each stage below needs)
        self.nodes, self.real_total = setting.nodes, setting.total
        weights = setting.role_weights  # the operator's: roles', not frameworks'
        # what the run is measured against (slots: the DRF ideal), read once; under CEEI
        # (the paper's 5) also the weights: weighted DRF whose weights are each framework's
        # CEEI share, phase by phase, so whoever is furthest below its target is served first
        self.ideal = ideal_of(spec, self.real_total, weights)
        self.ceei = self.ideal.phases if policy == "ceei" else []
        self._ceei_phase = -1
        engine = {"slots": "drf", "ceei": "wdrf"}.get(policy, policy)
        self.allocator = Allocator(engine, quota_headroom=spec.master.quota_headroom)
        for role, weight in weights.items():
            self.allocator.roles.set_weight(role, weight)
        for role, quota in setting.quotas.items():
            self.allocator.roles.set_quota(role, quota)
        for slave_id, resources in self.nodes.items():
            self.allocator.add_slave(slave_id, self.booked(resources, node=True))
        self.workloads = {f.name: Workload(f, spec.run.seed) for f in spec.frameworks}
        self.frameworks = {f.name: f for f in spec.frameworks}
        self.added: dict[str, None] = {}  # those started, in the order they came
        self.tasks: dict[int, Running] = {}  # running, by ref
        # what each framework holds and, where a node may be oversubscribed (slots, cpu),
        # what runs on each node, really (fixed point, kept in place: the hot path builds
        # no vectors)
        self.node_load: dict[str, Millis] = {s: {} for s in self.nodes}
        self.node_tasks: dict[str, int] = dict.fromkeys(self.nodes, 0)
        self.held: dict[str, Millis] = {f: {} for f in self.workloads}
        self.counts: dict[str, int] = dict.fromkeys(self.workloads, 0)
        self.events: list[tuple[float, int, str, int]] = []
        self.seq = itertools.count()
        self.ids = itertools.count()
        self.finishing: dict[int, int] = {}  # a finish event's first task: how many tasks
        self.round_pending = False
        self.arrival_scheduled: dict[str, float] = {}  # each trace's next job, awaited
        self.processed = 0  # task events handled (starts and finishes)
        self.offers = 0  # offers made, and those that launched nothing (declines)
        self.declines = 0
        self.now = 0.0
        self.cycle = OfferCycle(
            self.allocator,
            SimulatedBooks(self),
            CycleConfig(
                policy=spec.master.policy,
                allocation_interval=spec.master.allocation_interval,
                preemption=setting.preemption,
                record_offers=False,  # (what rounds offered is for a person asking why)
            ),
        )
        self.preempting = self.cycle.preempting
        self.preempted_at: list[tuple[float, str, float]] = []  # (time, victim, work lost)
        self.offered_at: dict[str, float] = {}  # when each framework was last offered
        # only what the allocator does not account in full can oversubscribe a node
        self.overbooks = spec.master.policy in ("slots", "cpu")
        self._allocate_on_free = spec.master.allocate_on_free  # (read once a task event)

    # -- what the allocator accounts -----------------------------------------------------------
    def booked(self, real: Resources, *, node: bool = False) -> Resources:
        """What the allocator accounts for `real` (a task's, or a `node`'s), each made
        once: asked of every offer a framework may decline."""
        policy = self.spec.master.policy
        if policy == "slots":
            return self._node_slots if node else self._slot
        if policy == "cpu":
            cpus = self._cpus.get(real)
            if cpus is None:
                cpus = self._cpus[real] = Resources(cpus=real.get(CPUS, 0.0))
            return cpus
        return real

    # -- events --------------------------------------------------------------------------------
    def _at(self, t: float, kind: str, ref: int = 0) -> None:
        heapq.heappush(self.events, (t, next(self.seq), kind, ref))

    def _freed(self, t: float) -> None:
        """A task's end freed resources: a round soon, or (`allocate_on_free` off, as
        the master's flag) at the next tick, with whatever else ends before it."""
        if self._allocate_on_free:
            self._want_round(t)

    def _want_round(self, t: float) -> None:
        if not self.round_pending:
            self.round_pending = True
            self._at(t + ROUND_BATCH, "round")

    def run(
        self,
        progress: Callable[[float], None] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> Results:
        """Simulate to the end; `progress(simulated seconds)` is called now and then, and
        so is `stop()`: once it says so, the run ends there, its results partial."""
        spec = self.spec
        end = spec.run.duration
        self._at(0.0, "tick")
        self._at(0.0, "sample")
        for f in spec.frameworks:
            self._at(f.start, "start", hash(f.name))
            if f.stop is not None:
                self._at(f.stop, "stop", hash(f.name))
        names = {hash(n): n for n in self.workloads}
        results = Results(spec.name, "simulated", spec.master.policy, self.real_total)
        results.with_ideal(self.ideal)
        next_report = 0.0
        events, pop = self.events, heapq.heappop  # (bound once: read once an event)
        finish, round_ = self._finish, self._round
        while events:
            t, _, kind, ref = pop(events)
            if t > end:
                break
            self.now = t
            if t >= next_report:
                if progress is not None:
                    progress(t)
                if stop is not None and stop():
                    results.stopped_at = t
                    break
                next_report = t + end / REPORTS
            if kind == "finish":
                finish(ref, t)
            elif kind == "round":
                self.round_pending = False
                round_(t)
            elif kind == "tick":
                if self.preempting:  # (off, the check has nothing to say)
                    self._preempt(t)
                self._round(t)
                self._at(t + spec.master.allocation_interval, "tick")
            elif kind == "kill":
                for kill in self.cycle.kills_due(t):
                    self._kill(int(kill.task_id), t)
            elif kind == "sample":
                self._sample(t, results)
                self._at(t + spec.run.sample_interval, "sample")
            elif kind == "start":
                self._start_framework(names[ref], t)
            elif kind == "stop":
                self._stop_framework(names[ref], t)
            elif kind == "arrival":
                self._follow(names[ref], t)
                self._schedule_arrival(names[ref])
                self._want_round(t)
        for name, w in self.workloads.items():
            results.framework_stats[name] = {
                "tasks_completed": w.stats.tasks_completed,
                "waits": w.stats.waits,
                "job_times": w.stats.job_times,
                "job_sizes": w.stats.job_sizes,
            }
        if self.preempting:
            stats = self.cycle.preemption.stats
            results.preemption = {
                "tasks_preempted": stats.tasks_preempted,
                "work_lost_seconds": round(stats.work_lost_seconds, 3),
                "rounds": stats.rounds,
                "victims": spec.master.preemption.victims if spec.master.preemption else "",
                "events": [
                    {"time": round(t, 3), "victim": v, "work_lost": round(w, 3)}
                    for t, v, w in self.preempted_at
                ],
            }
        return results

    def _start_framework(self, name: str, t: float) -> None:
        fw = self.frameworks[name]
        self.allocator.add_framework(name, role=fw.role or name)
        self.added[name] = None
        self.workloads[name].advance(t)
        self._schedule_arrival(name)
        self._follow(name, t)
        self._want_round(t)

    def _follow(self, name: str, t: float) -> None:
        """The framework tells the offer cycle what it wants, as it would: no offers while
        it has nothing to run; with min_offer, only slaves with room for its next task."""
        if name not in self.added:
            return
        workload = self.workloads[name]
        wants = workload.wants(t)
        smallest = None
        if wants and self.frameworks[name].min_offer:
            smallest = workload.next_task(t).resources
            if self.overbooks:
                smallest = self.booked(smallest)
        if self.cycle.wants_offers(name, wants, smallest):
            self._want_round(t)

    def _schedule_arrival(self, name: str) -> None:
        nxt = self.workloads[name].next_arrival()  # (arrivals only move forward)
        if nxt is not None and self.arrival_scheduled.get(name) != nxt:
            self.arrival_scheduled[name] = nxt
            self._at(nxt, "arrival", hash(name))

    def _stop_framework(self, name: str, t: float) -> None:
        """A framework that leaves is torn down: its tasks are killed."""
        for ref, r in list(self.tasks.items()):
            if r.framework == name:
                self._release(ref, t, completed=False)
        self.allocator.remove_framework(name)
        self.cycle.forget(name, t)
        self.added.pop(name, None)
        self._want_round(t)

    # -- preemption: the offer cycle's check, its kills on the heap ----------------------------
    def _preempt(self, t: float) -> None:
        plan = self.cycle.check(t)  # (the room each claim frees is held for its claimant)
        if plan.claims:
            self._at(plan.kill_at, "kill")

    def _kill(self, ref: int, t: float) -> None:
        r = self.tasks[ref]
        if self.cycle.task_ended(r.framework, str(ref), finished=False, ran=t - r.started, now=t):
            self.preempted_at.append((t, r.framework, t - r.started))
        self._release(ref, t, completed=False, retry=True)
        self._freed(t)

    def _ceei_weights(self, t: float) -> None:
        phase = max((i for i, p in enumerate(self.ceei) if p.start <= t), default=-1)
        if phase == self._ceei_phase:
            return
        self._ceei_phase = phase
        for name, share in self.ceei[phase].shares.items():
            role = self.frameworks[name].role or name
            self.allocator.roles.set_weight(role, max(share, 1e-6))

    def _round(self, t: float) -> None:
        """The offer cycle's round; each offer answered at once by its framework: the
        tasks it launches, and the rest declined."""
        if self.ceei:
            self._ceei_weights(t)
        refuse = self.spec.master.refuse_seconds
        book = self.booked if self.overbooks else None
        workloads, frameworks = self.workloads, self.frameworks
        # what each asked needs (`answer`), as (resource, amount) pairs: read once an offer
        needs: dict[str, tuple[tuple[str, int], ...] | None] = {}
        declined: list[str] = []  # who declined an offer whole as it was made
        taken: dict[tuple[str, str], list[Pending]] = {}  # what each answered launches
        decline = declined.append

        def answer(framework_id: str, slave_id: str, free: Millis) -> Millis | None:
            """What of an offer of `free` a framework uses: the tasks its workload
            takes from it now, known as the offer is made (`ledger.Answer`), kept for
            the round's end; None (counted here) if it takes nothing. What it needs
            stands until it takes something: asked once a round until then."""
            need = needs.get(framework_id)  # (not a KeyError: 325,000 a §7.3 run)
            if need is None and framework_id not in needs:
                asked = workloads[framework_id].need(t, book)
                need = needs[framework_id] = None if asked is None else tuple(asked.items())
            if need is not None:
                for k, v in need:  # (holds inlined: asked once an offer)
                    if free.get(k, 0) < v:
                        break
                else:
                    left = dict(free)
                    taken[framework_id, slave_id] = workloads[framework_id].take_from(t, left, book)
                    del needs[framework_id]  # (it took some: asked again)
                    for k, v in left.items():
                        if v:
                            return {k: n - left[k] for k, n in free.items() if n != left[k]}
                    return free  # (all of it)
            decline(framework_id)
            return None

        cycle, offered_at, follow, arrivals = (
            self.cycle,
            self.offered_at,
            self._follow,
            self._schedule_arrival,
        )  # (bound once: these run for every offer)
        offers = cycle.round(t, answer, refuse).offers
        watching = cycle.preemption.claim_use.watching
        self.offers += len(offers) + len(declined)
        self.declines += len(declined)
        for fid in dict.fromkeys(declined):  # (declined as they were made: told once)
            offered_at[fid] = t
            arrivals(fid)
            # one that wanted a task which did not fit is as it was told last (nothing of
            # its workload changed since: it wants offers, and it is in the order), unless
            # its offer filter is its next task's size, which may change with the time
            if needs.get(fid) is None or frameworks[fid].min_offer:
                follow(fid, t)
        for a in offers:
            fid = a.framework_id
            offered_at[fid] = t
            used = a.resources  # (what the offer holds: what its framework used, if asked)
            tasks = taken.pop((fid, a.slave_id), None)
            if tasks is None:  # (not asked as it was made: answered now, the rest declined)
                left = dict(used.millis)
                tasks = workloads[fid].take_from(t, left, book)  # (left: what is not used)
                if not tasks:  # declined whole: the offer's own resources go back
                    self.declines += 1
                    cycle.decline(fid, a.slave_id, used, refuse, t, whole=True)
                elif any(left.values()):  # (what it did not use; used whole, nothing back)
                    rest = Resources.from_millis(left)
                    cycle.decline(fid, a.slave_id, rest, refuse, t)
                    used = used - rest
            self._launched(fid, a.slave_id, tasks, book, t)
            if tasks and watching:  # (whether it used the room preemption freed for it)
                cycle.launched(fid, a.slave_id, used)
            arrivals(fid)
            follow(fid, t)

    def _launched(
        self,
        name: str,
        slave: str,
        tasks: list[Pending],
        book: Callable[[Resources], Resources] | None,
        t: float,
    ) -> None:
        """Start the tasks one offer launched; those that end together end in one event."""
        group, ends = 0, -1.0
        for task in tasks:
            booked = task.resources if book is None else book(task.resources)
            ref, task_ends = self._launch(name, slave, task, booked, t)
            if group and task_ends == ends:
                self.finishing[ref - group] = group + 1
                group += 1
            else:
                self._at(task_ends, "finish", ref)
                self.finishing[ref] = 1
                group, ends = 1, task_ends

    def _launch(
        self, name: str, slave: str, task: Pending, booked: Resources, t: float
    ) -> tuple[int, float]:
        """Start a task; returns its ref and when it ends (the caller schedules that)."""
        real = task.resources
        slowdown = 1.0
        if self.overbooks:  # a node may be oversubscribed: what runs there matters
            capacity, load = self.nodes[slave], self.node_load[slave]
            add_millis(load, real.millis)
            self.node_tasks[slave] += 1
            if not holds(capacity.millis, load):
                slowdown = swap_slowdown(
                    Resources.from_millis(load), capacity, real, self.node_tasks[slave]
                )
        ref = next(self.ids)
        ends = t + task.duration * slowdown
        self.tasks[ref] = Running(name, slave, task, real, booked, ends, t)
        add_millis(self.held[name], real.millis)
        self.counts[name] += 1
        self.processed += 1
        return ref, ends

    def _finish(self, first: int, t: float) -> None:
        """Tasks launched on one offer and ending at one time end together: their
        resources go back to the allocator at once (one recover, not one per task). Those
        killed meanwhile are gone already."""
        tasks = self.tasks
        ended = [
            (ref, task)
            for ref in range(first, first + self.finishing.pop(first))
            if (task := tasks.pop(ref, None)) is not None
        ]
        if not ended:
            return
        for ref, r in ended:
            self._end(ref, r, t, True)
        if len(ended) == 1:  # (the usual: one task, what it booked comes back; no sum made)
            back = r.booked
        else:
            freed: Millis = {}
            for _, task in ended:
                add_millis(freed, task.booked.millis)
            back = Resources.from_millis(freed)
        if r.framework in self.added:
            self.allocator.recover(r.framework, r.slave, back)
        self._follow(r.framework, t)
        self._freed(t)

    def _release(self, ref: int, t: float, *, completed: bool, retry: bool = False) -> None:
        r = self.tasks.pop(ref)
        self._end(ref, r, t, completed=completed, retry=retry)
        if r.framework in self.added:
            self.allocator.recover(r.framework, r.slave, r.booked)
        self._follow(r.framework, t)

    def _end(self, ref: int, r: Running, t: float, completed: bool, retry: bool = False) -> None:
        """A task is over: the simulator's books and the framework's workload (the
        allocator's books are the caller's)."""
        if self.preempting and completed:
            self.cycle.task_ended(r.framework, str(ref), finished=True, ran=t - r.started)
        if self.overbooks:
            sub_millis(self.node_load[r.slave], r.real.millis, f"node {r.slave}")
            self.node_tasks[r.slave] -= 1
        sub_millis(self.held[r.framework], r.real.millis, r.framework)
        self.counts[r.framework] -= 1
        self.processed += 1
        self.workloads[r.framework].finished(t, r.task, completed=completed, retry=retry)

    def _sample(self, t: float, results: Results) -> None:
        self._why_waiting(t, results)
        total = self.real_total
        for name in self.workloads:
            held = Resources.from_millis(self.held[name])
            if name in self.added or self.counts[name]:
                results.samples.append(
                    Sample(t, name, self.counts[name], held, held.dominant_share(total))
                )
        # in use on a node is at most what it has: oversubscription slows tasks, it does
        # not make more resources (summed in fixed point: exact, whatever the order)
        in_use: Millis = {}
        if self.overbooks:
            for slave, load in self.node_load.items():
                capacity = self.nodes[slave].millis
                for r, amount in load.items():
                    if amount:
                        in_use[r] = in_use.get(r, 0) + min(amount, capacity.get(r, 0))
        else:  # nothing is oversubscribed: what is in use is what the frameworks hold
            for framework_holds in self.held.values():
                add_millis(in_use, framework_holds)
        results.utilisation.append(
            (
                t,
                {
                    r: v / SCALE / total[r]
                    for r in sorted(in_use)
                    if (v := in_use[r]) and total.get(r)
                },
            )
        )

    def _why_waiting(self, t: float, results: Results) -> None:
        """Each framework that wants tasks run and was offered nothing since the last
        sample waited a sample's time, for the reason that explains first (as the master's
        `why` says it)."""
        interval = self.spec.run.sample_interval
        for name in self.added:
            offered = self.offered_at.get(name, -interval) >= t - interval
            if offered or not self.workloads[name].wants(t):
                continue
            told = self.cycle.why_first(name, t)
            if told is not None:  # (its sentence is made the first time its code is said)
                results.waited_for(name, told.code, told.message, t, interval)


def simulate(
    spec: Spec,
    progress: Callable[[float], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> tuple[Results, dict[str, float]]:
    """Run a spec; returns the results and the simulator's own speed. `progress` and
    `stop`: see `Simulation.run`."""
    sim = Simulation(spec)
    start = time.perf_counter()
    # the collector waits for the run's end (as for each of the master's rounds): a run
    # makes few reference cycles (6,414 objects in all in §7.3's 288,000 task events),
    # and walking the young objects every 700 new ones took 7% of its time
    with PausedCollector():
        results = sim.run(progress, stop)
    elapsed = time.perf_counter() - start
    return results, {
        "wall_seconds": elapsed,
        "task_events": sim.processed,
        "events_per_second": sim.processed / elapsed if elapsed else 0.0,
        "offers": sim.offers,
        "declines": sim.declines,
    }
