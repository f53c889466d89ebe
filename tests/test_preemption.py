"""Preemption's policy (master.allocation.preemption): fair shares, starvation, and the victim
choice on random clusters, checked against the rules the lecture and the issue set."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from master.allocation.fair_shares import Contender, fair_shares
from master.allocation.planning import EPSILON, Cluster, RunningTask
from master.allocation.preemption import (
    Preemption,
    PreemptionConfig,
    fits,
    is_starving,
    plan_on_slave,
    plan_preemption,
)
from protocol.wire.resources import Resources, dominant_share

NODE = Resources(cpus=8, mem=8192).millis
SHAPES = [
    Resources(cpus=1, mem=1024).millis,
    Resources(cpus=2, mem=512).millis,
    Resources(cpus=0.5, mem=2048).millis,
    Resources(cpus=4, mem=4096).millis,
]


def _add(into: dict[str, int], v: dict[str, int]) -> None:
    for n, x in v.items():
        into[n] = into.get(n, 0) + x


@st.composite
def clusters(draw: st.DrawFn) -> tuple[Cluster, str, dict[str, int], float]:
    """A packed cluster of 1-6 nodes, 2-4 frameworks with random tasks and start times;
    the fair shares are the policy's ideal for everyone wanting more."""
    nodes = draw(st.integers(1, 6))
    names = [f"f{i}" for i in range(draw(st.integers(2, 4)))]
    running: dict[str, list[RunningTask]] = {}
    free: dict[str, dict[str, int]] = {}
    held: dict[str, dict[str, int]] = {n: {} for n in names}
    k = 0
    for s in range(nodes):
        slave = f"s{s}"
        room = dict(NODE)
        tasks = []
        for _ in range(draw(st.integers(0, 10))):
            fw = draw(st.sampled_from(names[1:]))  # names[0] is the starving one: it holds none
            shape = draw(st.sampled_from(SHAPES))
            if not fits(shape, room):
                continue
            for n, v in shape.items():
                room[n] -= v
            k += 1
            started = draw(st.floats(0, 1000))
            tasks.append(RunningTask(fw, f"t{k}", slave, dict(shape), started))
            _add(held[fw], shape)
        running[slave] = tasks
        free[slave] = room
    total = {n: v * nodes for n, v in NODE.items()}
    contenders = [Contender(n, n, 1.0, held[n], True, None, draw(st.sampled_from(SHAPES)))
                  for n in names]  # fmt: skip
    fair = fair_shares("drf", total, contenders)
    claimant_task = draw(st.sampled_from(SHAPES))
    return Cluster(total, free, held, fair, running), names[0], claimant_task, 1000.0


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_the_victim_choice_frees_one_node_from_the_most_over_and_youngest_first(
    case: tuple[Cluster, str, dict[str, int], float],
) -> None:
    cluster, claimant, task, now = case
    before = {f: dict(h) for f, h in cluster.held.items()}
    shares = {f: dominant_share(h, cluster.total) for f, h in before.items()}
    fair = dict(cluster.fair)
    free_before = {s: dict(r) for s, r in cluster.free.items()}
    if any(fits(task, room) for room in free_before.values()):
        return  # it fits somewhere already: not starving
    running_before = {s: list(ts) for s, ts in cluster.running.items()}
    plans = plan_preemption(cluster, claimant, [task], now=now, short=lambda h: True,
                            max_tasks=1)  # fmt: skip
    if not plans:
        return  # nothing can be freed without taking from a framework at its fair share
    (plan,) = plans
    victims = plan.victims
    assert victims, "a plan frees something (else the claimant was not starving)"
    # one node: everything taken is on the plan's slave, and then the task fits there
    assert {v.slave_id for v in victims} == {plan.slave_id}
    room = dict(free_before[plan.slave_id])
    for v in victims:
        _add(room, v.resources)
    assert fits(task, room)
    # nothing from frameworks at or below their fair share, and none left below it
    after = {f: dict(h) for f, h in before.items()}
    for v in victims:
        assert shares[v.framework_id] > fair[v.framework_id] + EPSILON
        for n, x in v.resources.items():
            after[v.framework_id][n] -= x
    for f in {v.framework_id for v in victims}:
        assert dominant_share(after[f], cluster.total) >= fair[f] - EPSILON
    # the first victim is the most over-share framework with an eligible task there, and
    # of its tasks there its youngest eligible one
    first = victims[0]
    trial = Cluster(cluster.total, {}, {f: dict(h) for f, h in before.items()}, fair)
    eligible = [t for t in running_before[plan.slave_id] if t.framework_id != claimant
                and trial.may_lose(t) and any(t.resources.get(n, 0) for n in task)]  # fmt: skip
    most_over = max(trial.over(t.framework_id) for t in eligible)
    assert trial.over(first.framework_id) >= most_over - EPSILON
    same = [t for t in eligible if t.framework_id == first.framework_id]
    assert first.started == max(t.started for t in same)
    # within each victim, its tasks go youngest first
    for f in {v.framework_id for v in victims}:
        starts = [v.started for v in victims if v.framework_id == f]
        assert starts == sorted(starts, reverse=True)


def test_oldest_first_takes_the_oldest() -> None:
    tasks = [RunningTask("a", f"t{i}", "s0", dict(SHAPES[0]), float(i)) for i in range(8)]
    held: dict[str, dict[str, int]] = {"a": {}, "b": {}}
    for t in tasks:
        _add(held["a"], t.resources)
    total = dict(NODE)
    cluster = Cluster(total, {"s0": {"cpus": 0, "mem": 0}}, held, {"a": 0.5, "b": 0.5},
                      {"s0": tasks})  # fmt: skip
    assert [t.task_id for t in plan_on_slave(cluster, "b", "s0", SHAPES[0]) or ()] == ["t7"]
    oldest = plan_on_slave(cluster, "b", "s0", SHAPES[0], order="oldest") or ()
    assert [t.task_id for t in oldest] == ["t0"]


def test_a_framework_at_its_fair_share_is_never_a_victim() -> None:
    tasks = [RunningTask("a", f"t{i}", "s0", dict(SHAPES[0]), float(i)) for i in range(4)]
    held = {"a": {"cpus": 4000, "mem": 4096 * 1000}, "b": {}}
    cluster = Cluster(dict(NODE), {"s0": {"cpus": 4000, "mem": 4096 * 1000}}, held,
                      {"a": 0.5, "b": 0.5}, {"s0": tasks})  # fmt: skip
    # b wants a task bigger than what is free: a is exactly at its fair share
    assert plan_on_slave(cluster, "b", "s0", SHAPES[3] | {"cpus": 5000}) is None


def test_fair_shares_follow_declared_demand() -> None:
    total = {"cpus": 10_000, "mem": 10_000_000}
    small = Contender("s", "s", 1.0, {}, True, [(dict(SHAPES[0]), 2)])  # wants 2 tasks only
    big = Contender("b", "b", 1.0, {"cpus": 10_000, "mem": 10_000_000}, True, None,
                    dict(SHAPES[0]))  # fmt: skip
    fair = fair_shares("drf", total, [small, big])
    assert abs(fair["s"] - 0.2048) < 1e-9  # capped by its demand: 2 x 1024 of 10,000 MB
    assert abs(fair["b"] - 0.7952) < 1e-9  # the rest: the memory it leaves
    idle = Contender("i", "i", 1.0, {}, False, [])  # declared nothing more, holds nothing
    assert fair_shares("drf", total, [idle, big])["i"] == 0.0


def test_starving_needs_wanting_more_and_nothing_free_fitting() -> None:
    c = Contender("c", "c", 1.0, {}, True, [(dict(SHAPES[0]), 3)])
    assert is_starving(c, 0.0, 0.5, 0.5, [{"cpus": 500, "mem": 10**9}])
    assert not is_starving(c, 0.0, 0.5, 0.5, [dict(NODE)])  # room is free: no need
    assert not is_starving(c, 0.3, 0.5, 0.5, [])  # above half its fair share
    suppressed = Contender("c", "c", 1.0, {}, False, [])
    assert not is_starving(suppressed, 0.0, 0.5, 0.5, [])


def test_timers_claims_and_victims_end_once() -> None:
    """The policy's memory: a claim waits for the timeout, is made once, and a victim's
    end is counted with its work lost (once)."""
    p = Preemption(PreemptionConfig(timeout=30.0, notice=2.0))
    tasks = [RunningTask("a", f"t{i}", "s0", dict(SHAPES[0]), float(i)) for i in range(8)]
    held = {"a": {"cpus": 8000, "mem": 8192 * 1000}, "b": {}}
    a = Contender("a", "a", 1.0, held["a"], True, None, dict(SHAPES[0]))
    b = Contender("b", "b", 1.0, {}, True, [(dict(SHAPES[0]), 100)])

    def cluster() -> Cluster:
        return Cluster(dict(NODE), {"s0": {}}, {k: dict(v) for k, v in held.items()}, {},
                       {"s0": [t for t in tasks if ("a", t.task_id) not in p.doomed]})  # fmt: skip

    assert p.check(100.0, "drf", [a, b], cluster(), {}) == []
    assert p.check(129.0, "drf", [a, b], cluster(), {}) == []
    (claim,) = p.check(130.0, "drf", [a, b], cluster(), {})
    assert claim.claimant == "b"
    assert len(claim.plans) == 4
    assert [v.task_id for plan in claim.plans for v in plan.victims] == ["t7", "t6", "t5", "t4"]
    assert p.check(131.0, "drf", [a, b], cluster(), {}) == []  # in flight: no second claim
    assert p.due(131.0) == []
    assert len(p.due(132.0)) == 4
    assert p.due(133.0) == []
    assert p.ended("a", "t7", finished=False, ran=125.0)
    assert not p.ended("a", "t7", finished=False, ran=125.0)
    assert not p.ended("a", "t6", finished=True, ran=126.0)  # it finished first: no loss
    assert p.stats.tasks_preempted == 1
    assert p.stats.work_lost_seconds == 125.0


def test_a_role_over_its_share_gives_back_even_when_each_framework_is_at_its_part() -> None:
    """Fairness is between roles: three frameworks of role m hold 2 CPUs each (6 of 8),
    alice holds 2 and wants 4. Each m framework is over its third of m's half (4/3 CPUs)
    and would drop below that part by giving one task; m as a whole stays above its half.
    The claim takes from m (it was refused before: alice stayed at 2 for good)."""
    cpu = Resources(cpus=1, mem=64).millis
    node = Resources(cpus=4, mem=1024).millis
    tasks = [
        RunningTask(fw, f"{fw}-{i}", f"s{i % 2}", dict(cpu), float(i))
        for fw in ("m1", "m2", "m3", "alice")
        for i in range(2)
    ]
    held = {fw: {"cpus": 2000, "mem": 128_000} for fw in ("m1", "m2", "m3", "alice")}
    # (under the flat policies a framework's weight is its part of its role's weight)
    contenders = [Contender(fw, "m", 1 / 3, held[fw], True, [(dict(cpu), 4)]) for fw in held]
    contenders[-1] = Contender("alice", "alice", 1.0, held["alice"], True, [(dict(cpu), 4)])
    p = Preemption(PreemptionConfig(timeout=1.0, notice=0.5, threshold=1.0))
    total = {n: 2 * v for n, v in node.items()}

    def cluster() -> Cluster:
        free = {"s0": {"mem": 768_000}, "s1": {"mem": 768_000}}
        running: dict[str, list[RunningTask]] = {}
        for t in tasks:
            if (t.framework_id, t.task_id) not in p.doomed:
                running.setdefault(t.slave_id, []).append(t)
        return Cluster(total, free, {k: dict(v) for k, v in held.items()}, {}, running)

    assert p.check(0.0, "drf", contenders, cluster(), {}) == []
    (claim,) = p.check(1.0, "drf", contenders, cluster(), {})
    assert claim.claimant == "alice"
    victims = [v for plan in claim.plans for v in plan.victims]
    assert len(victims) == 2  # alice up to its half; m down to its half, not below
    assert {v.framework_id for v in victims} <= {"m1", "m2", "m3"}
    assert len({v.framework_id for v in victims}) == 2  # one from each of the most over


ROLES = ["a", "a/x", "a/y", "b", "c", "*"]


Books = tuple[dict[str, str], dict[str, float], dict[str, dict[str, int]], list[RunningTask]]
BIG = Resources(cpus=6, mem=6144).millis  # a task that fits on no node once they are busy


@st.composite
def role_books(draw: st.DrawFn) -> Books:
    """2-5 frameworks in flat or nested roles (and the default one), weights 1-3, each
    with a task shape (a big one, too), and the tasks they run on 1-4 nodes, packed."""
    names = [f"f{i}" for i in range(draw(st.integers(2, 5)))]
    roles = {f: draw(st.sampled_from(ROLES)) for f in names}
    weights = {f: float(draw(st.integers(1, 3))) for f in names}
    shapes = {f: dict(draw(st.sampled_from([*SHAPES, BIG]))) for f in names}
    tasks = []
    for s in range(draw(st.integers(1, 4))):
        room = dict(NODE)
        for k in range(draw(st.integers(0, 16))):
            fw = draw(st.sampled_from(names))
            shape = shapes[fw] if shapes[fw] != BIG else dict(SHAPES[0])
            if fits(shape, room):
                for n, v in shape.items():
                    room[n] -= v
                tasks.append(RunningTask(fw, f"s{s}t{k}", f"s{s}", dict(shape), float(k)))
    return roles, weights, shapes, tasks


def branch(role: str, framework: str, tree: bool, roles: Iterable[str] = ()) -> list[str]:
    """A framework's path as the ideal places it (written here, not taken from planning):
    its role's nodes, root first, then itself; the default role `*` is one role as any
    other, and on a tree a role with others below it among `roles` puts its own
    frameworks together as its child "." (the allocator orders them so: review 69)."""
    nodes = [role] if not tree else ["/".join(role.split("/")[: i + 1])
                                     for i in range(len(role.split("/")))]  # fmt: skip
    if tree and any(r.startswith(role + "/") for r in roles):
        nodes.append(f"{role}/.")
    return [*nodes, framework]


@settings(max_examples=1500, deadline=None)  # (about one case in four makes a claim)
@given(role_books(), st.sampled_from(["drf", "hdrf"]), st.sampled_from([0.5, 1.0]))
def test_claims_take_only_where_roles_meet_over_and_never_swing_back_and_forth(
    books: Books, policy: str, threshold: float
) -> None:
    """Checks run one after another, each claim carried out at once: every victim was
    over its own fair share; where it meets its claimant -- found here as the first node
    their paths part at -- the victim's branch ends at or above its fair share there, and
    when that branch is a role (not the victim itself) the claimant's branch was below
    its own; and no two frameworks take from each other back and forth (A from B, B
    from A, A from B again: two roles over their shares swapping a task for ever). One
    taking back once is allowed: a task is lumpy, and a claimant that overshot its share
    with one gives back to a role that went below its own meanwhile."""
    claims_carried_out(books, policy, threshold, NODE)


def claims_carried_out(
    books: Books, policy: str, threshold: float, node_size: dict[str, int]
) -> list[tuple[str, str]]:
    """The property's rounds (see above); who took from whom, in order."""
    roles, weights, shapes, tasks = books
    tree = policy == "hdrf"
    nodes = sorted({t.slave_id for t in tasks}) or ["s0"]
    total = {n: v * len(nodes) for n, v in node_size.items()}
    p = Preemption(PreemptionConfig(timeout=0.0, notice=0.0, threshold=threshold))
    paths = {f: branch(roles[f], f, tree, roles.values()) for f in roles}
    took: list[tuple[str, str]] = []
    for round_ in range(8):
        held: dict[str, dict[str, int]] = {f: {} for f in roles}
        free = {s: dict(node_size) for s in nodes}
        running: dict[str, list[RunningTask]] = {}
        for t in tasks:
            _add(held[t.framework_id], t.resources)
            for n, v in t.resources.items():
                free[t.slave_id][n] -= v
            running.setdefault(t.slave_id, []).append(t)
        contenders = [Contender(f, roles[f], weights[f], held[f], True, None, dict(shapes[f]))
                      for f in roles]  # fmt: skip
        cluster = Cluster(total, free, {f: dict(h) for f, h in held.items()}, {}, running)
        claims = p.check(float(round_), policy, contenders, cluster, {}, None, tree)
        if not claims:
            return took
        fair = p.fair
        fair_held = {f: {n: v * 1000 for n, v in r.items()} for f, r in p.fair_resources.items()}

        def standing(
            members: list[str], now: dict[str, dict[str, int]], fair_held: dict[str, Any]
        ) -> tuple[float, float]:
            h: dict[str, int] = {}
            fh: dict[str, float] = {}
            for m in members:
                _add(h, now[m])
                for n, v in fair_held.get(m, {}).items():
                    fh[n] = fh.get(n, 0.0) + v
            return dominant_share(h, total), dominant_share(fh, total)  # type: ignore[arg-type]

        for claim in claims:
            c = claim.claimant
            for plan in claim.plans:
                for v in plan.victims:
                    f = v.framework_id
                    if (f, c) in took:
                        back = took.index((f, c))
                        assert (c, f) not in took[:back], f"{c} and {f} swing: {took}"
                    assert dominant_share(held[f], total) > fair[f] + EPSILON
                    k = next(i for i, (x, y) in enumerate(zip(paths[f], paths[c] + [""] * 9,
                                                              strict=False)) if x != y)  # fmt: skip
                    node = paths[f][: k + 1]
                    members = [g for g in roles if paths[g][: k + 1] == node]
                    for n, x in v.resources.items():
                        held[f][n] -= x
                    share, fair_there = standing(members, held, fair_held)
                    assert share >= fair_there - EPSILON, (node, share, fair_there)
                    if node[-1] != f:  # a role against the claimant's branch
                        mine = paths[c][: k + 1]
                        ours = [g for g in roles if paths[g][: len(mine)] == mine]
                        share, fair_there = standing(ours, held, fair_held)
                        assert share < fair_there + EPSILON, (mine, share, fair_there)
                    took.append((c, f))
                    tasks.remove(v)
                    p.ended(f, v.task_id, finished=False, ran=1.0)
                _add(held[c], plan.task)
                tasks.append(RunningTask(c, f"r{round_}-{len(tasks)}", plan.slave_id,
                                         dict(plan.task), 100.0 + round_))  # fmt: skip
    return took


def test_two_roles_over_their_shares_do_not_take_a_task_from_each_other() -> None:
    """The case that made them (hdrf, threshold 1): f0 in the default role wants tasks
    that fit nowhere, so roles a/x and b both stand over their shares; each of their
    frameworks, below its own share once it lost a task, took it back from the other
    role at the next check, for ever. Now neither role takes from the other: neither is
    below its share."""
    node = Resources(cpus=4, mem=4096).millis
    one = dict(Resources(cpus=1, mem=1024).millis)
    roles = {"f0": "*", "f1": "a/x", "f2": "b"}
    weights = {"f0": 1.0, "f1": 2.0, "f2": 2.0}
    shapes = {"f0": dict(Resources(cpus=3, mem=3072).millis), "f1": one, "f2": one}
    tasks = [
        RunningTask(fw, f"{fw}-{s}{i}", s, dict(one), float(i))
        for s in ("s0", "s1")
        for fw in ("f1", "f2")
        for i in range(2)
    ]
    took = claims_carried_out((roles, weights, shapes, tasks), "hdrf", 1.0, node)
    assert not ({("f1", "f2"), ("f2", "f1")} <= set(took))
