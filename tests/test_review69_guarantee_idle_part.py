"""Review 69: a guarantee partly met by the role's idle reservation is preempted for in
full, as if the reservation were not there.

`Preemption._guarantee_claims` counts the role's idle reservations as held (as the quota
stage does, since the idle-reservations review), so a role holding 2 CPUs in tasks and 1
reserved and idle, guaranteed 4, lacks 1. But the plan's `short` (`Preemption._plan`)
asks the guarantee of the tasks alone (`others` + the claimant's held): it frees room
until B's tasks hold 4, killing 2 of A's tasks where 1 met the guarantee -- B ends with
5 CPUs against a guarantee of 4, with fair-share preemption off.
"""

from __future__ import annotations

from master.allocation.allocator import Allocator
from master.allocation.preemption import PreemptionConfig
from master.allocation.quota import Quota
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books, book_running

R = Resources.parse
TASK = R("cpus:1;mem:1024")


def test_a_guarantee_partly_met_by_an_idle_reservation_takes_only_what_it_lacks() -> None:
    config = CycleConfig(preemption=PreemptionConfig(guarantee_timeout=5.0, notice=2.0))
    a, books = Allocator("drf"), Books()
    for name in ("A", "B"):
        a.add_framework(name, name)
        books.roles[name] = name
    for i in range(3):
        a.add_slave(f"s{i}", R("cpus:4;mem:4096"))
    a.add_slave("s3", R("cpus(B):1"))  # B's, idle: it holds no task of B's (no memory)
    a.roles.set_quota("B", Quota(R("cpus:4")))
    cycle = OfferCycle(a, books, config)
    placed = [("A", "s0")] * 4 + [("A", "s1")] * 4 + [("A", "s2")] * 2 + [("B", "s2")] * 2
    for k, (name, slave) in enumerate(placed):
        book_running(a, books, name, slave, f"t{k}", TASK, k)
    books.demand["B"] = [(dict(TASK.millis), 5)]
    assert a.quota_stage.lack("B") == {"cpus": 1000}  # 4 less 2 in tasks, 1 reserved idle

    claims = cycle.check(0.0).claims + cycle.check(5.0).claims
    victims = [v.task_id for c in claims for p in c.plans for v in p.victims]
    assert len(victims) == 1, (
        f"role B lacks 1 CPU of its guarantee, yet {len(victims)} of A's 1-CPU tasks were "
        f"claimed for it: {victims}"
    )
