"""Review 74's rig: the offer cycle with the books in memory (`harness.cycle.Books`), a
check, the kills due and a round every second, and tenants that each either use the room
offered to them (launching tasks up to what they declared, a declared launch counted off)
or turn every offer down; a hog with no declared demand fills whatever it is offered."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from master.allocation.allocator import Allocator
from master.allocation.planning import RunningTask
from master.allocation.preemption import PreemptionConfig
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books

TASK = Resources(cpus=1, mem=1024)
SLAVE = Resources(cpus=4, mem=4096)


@dataclass
class Tenant:
    name: str
    role: str  # (its first role)
    principal: str
    declare: int = 0  # tasks it declares it wants (0: none, the hog: more of what it runs)
    uses: bool = True  # launches in what it is offered; else declines it whole
    joins: float = 0.0
    roles: Sequence[str] = ()  # a multi-role framework's roles
    leaves: float | None = None  # when it is torn down (None: never)
    runs: float | None = None  # how long each task runs, then finishes (None: for ever);
    # a tenant that declared tasks then wants another in its place (a steady workload)


@dataclass
class Run:
    allocator: Allocator
    books: Books
    cycle: OfferCycle
    reached: dict[str, float]  # first second each tenant ran `targets[name]` tasks
    killed: dict[str, int]  # tasks of each killed by preemption

    def running(self, name: str) -> int:
        return sum(1 for fid, _ in self.books.tasks if fid == name)


def simulate(
    tenants: Sequence[Tenant],
    until: float,
    targets: dict[str, int],
    *,
    policy: str = "drf",
    slaves: int = 2,
    config: PreemptionConfig | None = None,
    setup: Callable[[Allocator], None] | None = None,
) -> Run:
    """Run the tenants until `until` (a second a step); `setup(allocator)` before slaves
    are added (quota, weights)."""
    preemption = config or PreemptionConfig(timeout=2.0, notice=1.0, threshold=1.0)
    a, books = Allocator(policy, quota_headroom="demand"), Books()
    if setup is not None:
        setup(a)
    for i in range(slaves):
        a.add_slave(f"s{i}", SLAVE)
    cycle = OfferCycle(a, books, CycleConfig(policy=policy, preemption=preemption))
    run = Run(a, books, cycle, {}, {t.name: 0 for t in tenants})
    by_name = {t.name: t for t in tenants}
    joined: set[str] = set()
    gone: set[str] = set()
    n = 0
    for step in range(int(until)):
        now = float(step)
        for t in tenants:
            if t.name in joined and t.name not in gone and t.leaves is not None and now >= t.leaves:
                gone.add(t.name)
                for key in [k for k in books.tasks if k[0] == t.name]:
                    del books.tasks[key]
                for offer_key in [k for k, o in books.offers.items() if o.framework_id == t.name]:
                    del books.offers[offer_key]
                a.remove_framework(t.name)
                cycle.forget(t.name, now)
                del books.roles[t.name]
                books.demand.pop(t.name, None)
                continue
            if t.name not in joined and now >= t.joins:
                joined.add(t.name)
                if t.roles:
                    a.add_framework(t.name, roles=list(t.roles))
                else:
                    a.add_framework(t.name, t.role)
                books.roles[t.name], books.tenants[t.name] = t.role, t.principal
                if t.declare:
                    books.demand[t.name] = [(dict(TASK.millis), t.declare)]
        for key, task in list(books.tasks.items()):
            runs = by_name[task.framework_id].runs
            if runs is not None and now - task.started >= runs:  # (it finished)
                del books.tasks[key]
                cycle.task_ended(
                    key[0], key[1], finished=True, ran=runs, now=now, on=(task.slave_id, TASK)
                )
                a.recover(key[0], task.slave_id, TASK, role=task.role)
                declared = books.demand.get(key[0])
                if by_name[key[0]].declare:
                    left = declared[0][1] if declared else 0
                    books.demand[key[0]] = [(dict(TASK.millis), left + 1)]
        cycle.check(now)
        for kill in cycle.kills_due(now):
            task = books.tasks.pop((kill.framework_id, kill.task_id))
            cycle.task_ended(
                kill.framework_id, kill.task_id, finished=False, ran=1.0, now=now,
                on=(task.slave_id, TASK),
            )  # fmt: skip
            a.recover(kill.framework_id, task.slave_id, TASK, role=task.role)
            run.killed[kill.framework_id] += 1
        for o in cycle.round(now).offers:
            t = by_name[o.framework_id]
            if not t.uses:
                cycle.decline(o.framework_id, o.slave_id, o.resources, 5.0, now, o.role, whole=True)
                continue
            rest, launched = o.resources, Resources()
            while rest.contains(TASK):
                if t.declare:
                    left = books.demand[t.name][0][1] if books.demand.get(t.name) else 0
                    if not left:
                        break
                    books.demand[t.name] = [(dict(TASK.millis), left - 1)] if left > 1 else []
                n, rest, launched = n + 1, rest - TASK, launched + TASK
                books.tasks[(t.name, f"t{n}")] = RunningTask(
                    t.name, f"t{n}", o.slave_id, dict(TASK.millis), now, o.role
                )
            if launched:
                cycle.launched(t.name, o.slave_id, launched)
            if rest:
                cycle.decline(t.name, o.slave_id, rest, 5.0, now, o.role)
        for name, target in targets.items():
            if name not in run.reached and run.running(name) >= target:
                run.reached[name] = now
    return run
