"""Preemption's fair shares agree with how the allocator divides the cluster: random small
clusters, frameworks arriving one by one, preemption on (threshold 1), until it settles.

The cluster: 2-4 slaves of <4 CPU, 4 GB>; 2-4 frameworks, each in one role or two (a
multi-role framework), roles in one or two levels of pools (`a`, `a/x`, `b/x`, ...) with
weights, some pools ordered `fifo`; policies `hdrf` (the default), `flat` and `drf`
(roles side by side). Each framework wants endless tasks of one shape (it declares
nothing: it wants more of what it runs) and fills every offer with them; its tasks never
end, so what moves is what preemption frees. One framework comes every 20 s: the first
takes the idle cluster, and preemption gives each later one its share back (the
lecture's morning). The master's offer cycle drives the allocator in process (as the
review 69 tests do: the simulator has no multi-role frameworks), a check and a round a
second, the frameworks answering each offer as the round makes it.

What it asserts, once the run has settled (and why not the plain words of review 69):

(a) **The promise, for one victim on one node.** No framework is left below its fair
    share by one of its tasks or more while some other member -- a framework, or a
    multi-role framework's part in one role -- could, by giving up tasks on one node,
    make room there for one of its tasks and stay at or above its fair share where it
    meets the starving one: itself in the same role, its role (or pool) when they
    differ, the starving one's branch there being below its own (fairness is between
    roles); and, for the member's framework as a whole, at or above its fair share too;
    never between two children of a `fifo` pool (the first come keeps what it has).
    Not "nobody is below its share while another is over by one task": tasks are
    indivisible and of different sizes, and a claimant's one task of 2 CPUs takes four
    of a victim's tasks of 0.5 CPU on one node -- a victim over its share by two of its
    own tasks rightly keeps them (and a plan that gathers room from several victims is
    the planner's; this checks the case any correct planner must serve).
(b) **No victim at or below its fair share.** Every framework a claim takes a task from
    holds more than its fair share when the claim is made (less its tasks already
    doomed). (Not "none left below its fair share": three frameworks of one role over
    its share each give up a task though each then holds less than a third of the
    role's, by design; the role stays at or above its share.)
    (A framework whose room a claim frees in a check is no victim in that check: counted
    with its planned room it looked over its share, and lost a running task below it.)
(c) **No oscillation.** Once every framework has come and 150 s more have passed (room for
    a claimant's wait of 60 s after a claim judged unused), nothing is preempted any
    more: with no task ending, a claim that took back what an earlier one freed would
    show here. (Not with tasks that end: at threshold 1 the allocator's whole-task ties
    then feed preemption now and then -- flat, f1 in `a/y` (weight 2) at 4 tasks and f0's
    client in `b/x` at 1 are both at 0.75 of their promises, the freed task goes to f0,
    and f1, a task below its fair share, takes it back -- and decline filters keep room
    from a framework whose tasks just ended; kills stay few, but never stop.)

The fair shares are preemption's own (`fair_allocation`, the policy's ideal), read at
the end: (a) holds them to the allocator's division and to planning, which must weigh
each member where the ideal places it (review 69's lost test failed for two multi-role
frameworks across pools: planning put each whole in its first role).

100 examples (`max_examples`) and the two found, reduced (`@example`); about 12 s in all
(0.1 s an example).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hypothesis import example, given, settings
from hypothesis import strategies as st

from master.allocation.allocator import Allocator
from master.allocation.planning import EPSILON, RunningTask, part_name
from master.allocation.preemption import PreemptionConfig
from master.allocation.sorter import Millis
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources, dominant_share

from harness.cycle import Books

SLAVE = Resources(cpus=4, mem=4096)
SHAPES = [
    Resources(cpus=1, mem=1024),
    Resources(cpus=1, mem=512),
    Resources(cpus=2, mem=1024),
    Resources(cpus=0.5, mem=1024),
]
ROLES = ["a", "a/x", "a/y", "b", "b/x", "c"]
GAP = 20.0  # seconds between two frameworks' arrivals
SETTLE = 150.0  # seconds after the last arrival by which it has settled
RUN = 300.0  # ... and to the end of the run


@dataclass
class Case:
    policy: str
    slaves: int
    frameworks: list[tuple[str, tuple[str, ...], int]]  # name, roles, shape
    weights: dict[str, int]
    fifo: list[str]


@dataclass
class Run:
    allocator: Allocator
    cycle: OfferCycle
    books: Books
    claims: list[tuple[float, str, str]] = field(default_factory=list)  # time, claimant, victim
    victims_over: list[tuple[float, str, float, float]] = field(default_factory=list)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    policy = draw(st.sampled_from(["hdrf", "flat", "drf"]))
    # (roles side by side have no pools: `a/x` is a role of its own name there)
    name = (lambda r: r) if policy != "drf" else (lambda r: r.replace("/", "-"))
    frameworks = []
    for i in range(draw(st.integers(2, 4))):
        roles = draw(st.lists(st.sampled_from(ROLES), min_size=1, max_size=2, unique=True))
        frameworks.append((f"f{i}", tuple(map(name, roles)), draw(st.integers(0, len(SHAPES) - 1))))
    weights = draw(st.dictionaries(st.sampled_from(ROLES).map(name), st.integers(1, 3), max_size=3))
    fifo = [] if policy == "drf" else draw(st.lists(st.sampled_from(["a", "b"]), unique=True))
    return Case(policy, draw(st.integers(2, 4)), frameworks, weights, fifo)


def drive(case: Case) -> Run:
    """Frameworks come one every GAP seconds and fill every offer; a check and a round a
    second, victims killed at their deadline."""
    a, books = Allocator(case.policy), Books()
    for role, weight in case.weights.items():
        a.roles.set_weight(role, weight)
    for pool in case.fifo:
        a.roles.set_ordering(pool, "fifo")
    for s in range(case.slaves):
        a.add_slave(f"s{s}", SLAVE)
    preemption = PreemptionConfig(timeout=2.0, notice=1.0, threshold=1.0)
    cycle = OfferCycle(a, books, CycleConfig(policy=case.policy, preemption=preemption))
    run = Run(a, cycle, books)
    shapes = {name: SHAPES[k] for name, _, k in case.frameworks}

    def answer(client: str, slave_id: str, free: Millis) -> Millis | None:
        """As many of its tasks as the offer holds (a multi-role one's client is named
        `framework/role`)."""
        task = shapes[client.split("/", 1)[0]].millis
        n = min(free.get(r, 0) // v for r, v in task.items() if v)
        return {r: v * n for r, v in task.items()} if n > 0 else None

    last = GAP * (len(case.frameworks) - 1)
    n, t = 0, 0.0
    while t <= last + RUN:
        for i, (name, roles, _) in enumerate(case.frameworks):
            if i * GAP == t:
                if len(roles) > 1:
                    a.add_framework(name, roles=list(roles))
                else:
                    a.add_framework(name, roles[0])
                books.roles[name] = roles[0]
                books.shapes[name] = dict(shapes[name].millis)
        doomed = dict(cycle.preemption.doomed)
        plan = cycle.check(t)
        for claim in plan.claims:
            for p in claim.plans:
                for v in p.victims:
                    run.claims.append((t, claim.claimant, v.framework_id))
        for victim in {v for when, _, v in run.claims if when == t}:
            # (b): over its fair share when the claim was made, less its doomed tasks
            held = a.allocation(victim).millis
            for key, doomed_task in books.tasks.items():
                if key[0] == victim and key in doomed:
                    lost = doomed_task.resources
                    held = {r: v - lost.get(r, 0) for r, v in held.items()}
            share = dominant_share(held, a.total.millis)
            run.victims_over.append((t, victim, share, cycle.preemption.fair.get(victim, 0.0)))
        for kill in cycle.kills_due(t):
            task = books.tasks.pop((kill.framework_id, kill.task_id))
            resources = Resources.from_millis(task.resources)
            cycle.task_ended(kill.framework_id, kill.task_id, finished=False, ran=t - task.started,
                             now=t, on=(task.slave_id, resources))  # fmt: skip
            a.recover(kill.framework_id, task.slave_id, resources, role=task.role)
        for o in cycle.round(t, answer, 5.0).offers:
            shape = shapes[o.framework_id]
            rest = o.resources
            while rest.contains(shape):
                n, rest = n + 1, rest - shape
                books.tasks[(o.framework_id, f"t{n}")] = RunningTask(
                    o.framework_id, f"t{n}", o.slave_id, dict(shape.millis), t, o.role
                )
            cycle.launched(o.framework_id, o.slave_id, o.resources)
        t += 1.0
    return run


def _path(role: str, member: str, tree: bool, pools: set[str]) -> tuple[str, ...]:
    """Where a member stands, root first: its role's nodes (a pool's own frameworks as its
    child `.`), then itself."""
    if not tree:
        return (role, member)
    parts = role.split("/")
    nodes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return (*nodes, *([f"{role}/."] if role in pools else []), member)


def one_victim_could_serve(case: Case, run: Run) -> list[tuple[str, str, str]]:
    """(a): (starving framework, member, slave) where that member alone could make room on
    that slave for one of the framework's tasks, staying at or above its fair share where
    they meet."""
    a, p, books = run.allocator, run.cycle.preemption, run.books
    total = a.total.millis
    tree = a.roles.is_tree()
    every = [r for _, roles, _ in case.frameworks for r in roles]
    named = [*every, *a.roles.pool_weights()]  # (a pool: a role with roles below it)
    pools = {"/".join(r.split("/")[:i]) for r in named for i in range(1, r.count("/") + 1)}
    members: dict[str, tuple[str, str, Millis, Millis]] = {}  # framework, role, held, fair
    for fid, roles, _ in case.frameworks:
        for role in roles:
            multi = len(roles) > 1
            member = part_name(fid, role) if multi else fid
            fair = (p.fair_parts if multi else p.fair_resources).get(member, {})
            held = a.allocation(fid, role if multi else None).millis
            members[member] = (fid, role, dict(held), {n: round(v * 1000) for n, v in fair.items()})
    paths = {
        m: _path(role, m, tree, pools if tree else set()) for m, (_, role, _, _) in members.items()
    }

    def standing(node: tuple[str, ...]) -> tuple[Millis, float]:
        held: Millis = {}
        fair: Millis = {}
        for m, path in paths.items():
            if path[: len(node)] == node:
                for n, v in members[m][2].items():
                    held[n] = held.get(n, 0) + v
                for n, v in members[m][3].items():
                    fair[n] = fair.get(n, 0) + v
        return held, dominant_share(fair, total)

    def less(held: Mapping[str, int], taken: Mapping[str, int]) -> float:
        return dominant_share({n: v - taken.get(n, 0) for n, v in held.items()}, total)

    found = []
    for fid, _, k in case.frameworks:
        task = SHAPES[k].millis
        share, fair_share = a.dominant_share(fid), p.fair.get(fid, 0.0)
        if share > fair_share - dominant_share(task, total) + EPSILON:
            continue  # (not below its fair share by one of its tasks)
        mine = [m for m in members if members[m][0] == fid]
        for slave in a.slaves:
            for g, (gid, grole, gheld, gfair) in members.items():
                if gid == fid:
                    continue
                theirs = sorted(
                    (t for t in books.tasks.values() if t.framework_id == gid
                     and t.slave_id == slave and (t.role or grole) == grole),
                    key=lambda t: -t.started,
                )  # fmt: skip
                room, taken = dict(a.free(slave).millis), dict[str, int]()
                for t in theirs:
                    if all(room.get(n, 0) >= v for n, v in task.items()):
                        break
                    for n, v in t.resources.items():
                        room[n] = room.get(n, 0) + v
                        taken[n] = taken.get(n, 0) + v
                if not taken or not all(room.get(n, 0) >= v for n, v in task.items()):
                    continue
                if less(a.allocation(gid).millis, taken) < p.fair.get(gid, 0.0) - EPSILON:
                    continue  # (its framework would drop below its fair share)
                for me in mine:
                    ours, path = paths[me], paths[g]
                    depth = next(
                        i for i in range(len(path)) if i >= len(ours) or ours[i] != path[i]
                    )
                    group = path[: depth + 1]
                    alone = group[-1] == g
                    if not alone and (group[-2] if len(group) > 1 else "") in case.fifo:
                        continue  # (children of a fifo pool: the first come keeps it)
                    if alone:
                        held, gshare = gheld, dominant_share(gfair, total)
                    else:
                        held, gshare = standing(group)
                        node = ours[: depth + 1]
                        if node[-1] == me:
                            their, short_of = members[me][2], dominant_share(members[me][3], total)
                        else:
                            their, short_of = standing(node)
                        if dominant_share(their, total) >= short_of - EPSILON:
                            continue  # (its branch is not short where they meet)
                    if less(held, taken) >= gshare - EPSILON:
                        found.append((fid, g, slave))
    return found


# the examples it found, each reduced (kept: every run asks them first)
MULTI_ROLE = Case("hdrf", 2, [("f0", ("a",), 0), ("f1", ("a/x", "a"), 0)], {}, ["a"])
PLANNED_GAIN = Case(
    "hdrf",
    4,
    [("f0", ("a", "a/x"), 1), ("f1", ("a",), 3), ("f2", ("a", "a/x"), 0), ("f3", ("a", "b"), 1)],
    {"a": 1, "b": 2},
    [],
)


@settings(max_examples=100, deadline=None)
@given(case=cases())
@example(case=MULTI_ROLE)  # planning put f1 whole in a/x: f1 starved beside f0 in a
@example(case=PLANNED_GAIN)  # f0's claim, then f2's took f0's task: f0 was below its share
def test_preemption_keeps_the_promise_takes_from_none_under_its_share_and_settles(
    case: Case,
) -> None:
    run = drive(case)
    fair = run.cycle.preemption.fair
    shares = {f: round(run.allocator.dominant_share(f), 3) for f in fair}
    # (b)
    under = [(t, v, s, f) for t, v, s, f in run.victims_over if s <= f + EPSILON]
    assert not under, f"victims at or below their fair shares (time, victim, share, fair): {under}"
    # (c)
    settled = GAP * (len(case.frameworks) - 1) + SETTLE
    late = [c for c in run.claims if c[0] > settled]
    assert not late, f"preempted after {settled:.0f} s (time, claimant, victim): {late}"
    # (a)
    left = one_victim_could_serve(case, run)
    assert not left, (
        f"left starving (framework, member that could make room, slave): {left}; "
        f"shares {shares}, fair shares {fair}"
    )
