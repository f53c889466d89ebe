"""Preemption's policy (master.allocation.preemption): fair shares, starvation, and the victim
choice on random clusters, checked against the rules the lecture and the issue set."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from master.allocation.planning import EPSILON, Cluster, RunningTask
from master.allocation.preemption import (
    Contender,
    Preemption,
    PreemptionConfig,
    fair_shares,
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


@st.composite
def role_clusters(draw: st.DrawFn) -> tuple[Cluster, str, dict[str, int]]:
    """`clusters()` with the frameworks spread over two or three roles, the claimant's
    role possibly shared: fair shares, fair resources and paths as `Preemption.check`
    gives them."""
    cluster, claimant, task, _ = draw(clusters())
    names = sorted(cluster.held)
    roles = {f: draw(st.sampled_from(["r0", "r1", "r2"])) for f in names}
    contenders = [Contender(f, roles[f], 1.0, cluster.held[f], True, None,
                            draw(st.sampled_from(SHAPES))) for f in names]  # fmt: skip
    p = Preemption(PreemptionConfig())
    p.update_fair("drf", cluster.total, contenders, {})
    cluster.fair = dict(p.fair)
    cluster.fair_held = {f: {n: round(v * 1000) for n, v in r.items()}
                         for f, r in p.fair_resources.items()}  # fmt: skip
    cluster.paths = {f: (roles[f], f) for f in names}
    return cluster, claimant, task


@settings(max_examples=300, deadline=None)
@given(role_clusters())
def test_no_victim_is_over_taken_where_it_meets_the_claimant(
    case: tuple[Cluster, str, dict[str, int]],
) -> None:
    """Whatever a plan takes: each victim was over its own fair share, and where it meets
    the claimant (its role, if the roles differ; itself, if they share one) it ends at or
    above the fair share there."""
    cluster, claimant, task = case
    before = {f: dict(h) for f, h in cluster.held.items()}
    plans = plan_preemption(cluster, claimant, [task], now=1000.0, short=lambda h: True,
                            max_tasks=1)  # fmt: skip
    if not plans:
        return
    (plan,) = plans
    after = Cluster(cluster.total, {}, {f: dict(h) for f, h in before.items()}, cluster.fair,
                    {}, cluster.fair_held, cluster.paths)  # fmt: skip
    for v in plan.victims:
        assert after.over(v.framework_id) > EPSILON
        assert after.may_lose(v, claimant)
        for n, x in v.resources.items():
            after.held[v.framework_id][n] -= x
    for v in plan.victims:
        group = after.group(v.framework_id, claimant)
        if group[-1] == v.framework_id:
            held, fair = after.held[v.framework_id], after.fair[v.framework_id]
        else:
            held, fair = after.group_standing(group)
        assert dominant_share(held, cluster.total) >= fair - EPSILON
