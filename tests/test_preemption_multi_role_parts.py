"""Planning weighs a multi-role framework in each of its roles, as the ideal does.

The ideal (`fair_shares.fair_allocation`) gives a multi-role framework a user in each of
its roles, and planning (`planning.Cluster`) placed it whole in its first role: what it
holds and its fair share in every role were counted in the first one's standing. A
victim's role then looked at or below its fair share when it was over, and a claimant
was left starving beside a framework holding far more than its share (review 69's lost
property test, `tests/test_preemption_agrees_property.py`, found it with two multi-role
frameworks across pools). Now each role of it is a member of planning's tree (its part,
`planning.part_name`), its tasks weighed in their own role.
"""

from __future__ import annotations

from master.allocation.allocator import Allocator
from master.allocation.planning import RunningTask
from master.allocation.preemption import PreemptionConfig
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books

SLAVE = Resources(cpus=4, mem=4096)
CONFIG = PreemptionConfig(timeout=1.0, notice=1.0, threshold=1.0)


def rig(policy: str, weights: dict[str, float], roles: dict[str, list[str]]) -> tuple[
    Allocator, Books, OfferCycle
]:  # fmt: skip
    a, books = Allocator(policy), Books()
    for role, weight in weights.items():
        a.roles.set_weight(role, weight)
    for name, its in roles.items():
        if len(its) > 1:
            a.add_framework(name, roles=its)
        else:
            a.add_framework(name, its[0])
        books.roles[name] = its[0]
    for i in range(4):
        a.add_slave(f"s{i}", SLAVE)
    return a, books, OfferCycle(a, books, CycleConfig(policy=policy, preemption=CONFIG))


def run(a: Allocator, books: Books, name: str, slave: str, task: Resources, role: str | None,
        n: int) -> None:  # fmt: skip
    for i in range(n):
        tid = f"{name}-{slave}-{role}-{i}"
        a.allocate_existing(name, slave, task, role)
        books.tasks[(name, tid)] = RunningTask(name, tid, slave, dict(task.millis), 0.0, role)


def victims_of(cycle: OfferCycle) -> list[tuple[str, str]]:
    claims = []
    for now in (10.0, 11.0, 12.0, 13.0):  # a check a second, past the timeout
        claims += cycle.check(now).claims
    return [(c.claimant, v.framework_id) for c in claims for p in c.plans for v in p.victims]


def test_a_claimant_is_not_left_starving_for_a_multi_role_frameworks_other_role() -> None:
    """hdrf, pools `a` (weight 3) and `b` (2). vera in `a/x` runs 9 tasks <0.5 CPU, 1 GB>
    on s1-s3, over her fair share (0.56 of memory against 0.4); hydra runs one task <2
    CPU, 1 GB> in `a` on every slave, and nothing in its role `b`; carl in `b` runs 2
    tasks <1 CPU, 1 GB> on s0, a task below his fair share (0.125 against 0.2). A task of
    vera's on s1 makes room for one of carl's, and vera and `a` stay over their shares.
    Planning counted hydra's share of `b` in `a` (its first role): `a` looked short of
    its fair share, `b` over it, and carl starved."""
    roles = {"vera": ["a/x"], "hydra": ["a", "b"], "carl": ["b"]}
    a, books, cycle = rig("hdrf", {"a": 3, "b": 2}, roles)
    small, large, mid = (
        Resources(cpus=0.5, mem=1024),
        Resources(cpus=2, mem=1024),
        Resources(cpus=1, mem=1024),
    )
    for slave in ("s1", "s2", "s3"):
        run(a, books, "vera", slave, small, None, 3)
    for slave in ("s0", "s1", "s2", "s3"):
        run(a, books, "hydra", slave, large, "a", 1)
    run(a, books, "carl", "s0", mid, None, 2)
    books.demand["carl"] = [(dict(mid.millis), 8)]
    victims = victims_of(cycle)
    assert ("carl", "vera") in victims, (
        f"carl starves at {a.dominant_share('carl'):.3f} of the cluster while vera holds "
        f"{a.dominant_share('vera'):.3f}; fair shares: {cycle.preemption.fair}; victims {victims}"
    )


def test_a_multi_role_victim_keeps_its_own_fair_share_as_well_as_its_roles() -> None:
    """hdrf, roles `c` (weight 2) and `a`: hydra took the idle cluster in its roles `c`
    and `a`, 16 tasks <1 CPU, 512 MB> (8 in each), and its fair share is 5/6 (13.3 tasks);
    lena comes to `a` with tasks <1 CPU, 1 GB>. hydra's part in `a` is far over its part of
    `a`, but hydra as a whole may give up only 2 tasks: a third would take it below its
    fair share (and it would claim its task back: the two took tasks from each other)."""
    a, books, cycle = rig("hdrf", {"c": 2}, {"hydra": ["c", "a"], "lena": ["a"]})
    task = Resources(cpus=1, mem=512)
    for slave, role in (("s0", "a"), ("s1", "c"), ("s2", "c"), ("s3", "a")):
        run(a, books, "hydra", slave, task, role, 4)
    books.demand["lena"] = [(dict(Resources(cpus=1, mem=1024).millis), 8)]
    victims = victims_of(cycle)
    fair = cycle.preemption.fair["hydra"]
    left = 16 - len(victims)
    assert left / 16 >= fair - 1e-9, (
        f"hydra left with {left} of 16 tasks ({left / 16:.3f}), under its fair share "
        f"{fair:.3f}: victims {victims}"
    )
    assert victims == [("lena", "hydra")] * 2
