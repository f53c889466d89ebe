"""A role's own idle reservations are room for it, and count towards its guarantee, in
preemption's eyes, as in the quota stage's: nobody's task is killed for a role that has
room of its own (a hostile tenant's review: each test failed before its fix)."""

from __future__ import annotations

from master.allocation.allocator import Allocator
from master.allocation.preemption import PreemptionConfig
from master.allocation.quota import Quota
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books, book_running

R = Resources.parse


def test_a_framework_whose_own_reservation_fits_it_preempts_nobody() -> None:
    # is_starving asks whether any slave's free room (`Allocator.unheld`, by identity)
    # fits one of the claimant's task shapes (plain names: cpus, mem): `cpus(B)` is never
    # `cpus`, so a role's own idle reservations are no room to it. B, whose reservation
    # on s2 is idle and fits one of its tasks, is "starving" while A's tasks fill the
    # unreserved slaves, and after the timeout A's tasks are killed for it. A tenant with
    # a reservation that declines it (or declares a shape only unreserved room would
    # show) has other tenants' tasks killed at will; the room freed is unreserved, which
    # it did not need. (With the same room unreserved on s2, no claim is made.)
    config = CycleConfig(preemption=PreemptionConfig(timeout=5.0, notice=2.0))
    allocator, books = Allocator("drf"), Books()
    for name in ("A", "B"):
        allocator.add_framework(name, name)
        books.roles[name] = name
    for i in range(2):
        allocator.add_slave(f"s{i}", R("cpus:4;mem:4096"))
    allocator.add_slave("s2", R("cpus(B):1;mem(B):1024"))
    cycle = OfferCycle(allocator, books, config)
    task = R("cpus:1;mem:1024")
    cycle.wants_offers("B", False)
    for i in range(8):
        slave = f"s{i % 2}"
        book_running(allocator, books, "A", slave, f"t{i}", task, i)
    books.demand["B"] = [(dict(task.millis), 2)]
    cycle.wants_offers("B", True)
    assert allocator.free("s2") == R("cpus(B):1;mem(B):1024")  # B's own, idle: room for one
    assert cycle.check(0.0).claims == []
    assert cycle.check(5.0).claims == [], "A's tasks preempted for B, whose reservation is idle"


def test_a_role_whose_idle_reservation_meets_its_guarantee_preempts_nobody() -> None:
    # The quota stage counts a role's idle reservations as consumed quota
    # (QuotaStage.held_by_role, as Mesos); preemption's _guarantee_claims counts only
    # what its frameworks hold (`cluster.held`) and, as is_starving, no reserved room as
    # room: B, guaranteed cpus:1;mem:1024 and holding an idle reservation of exactly that,
    # is "below its guarantee", and A's tasks are killed for it.
    config = CycleConfig(preemption=PreemptionConfig(guarantee_timeout=5.0, notice=2.0))
    allocator, books = Allocator("drf"), Books()
    for name in ("A", "B"):
        allocator.add_framework(name, name)
        books.roles[name] = name
    for i in range(2):
        allocator.add_slave(f"s{i}", R("cpus:4;mem:4096"))
    allocator.add_slave("s2", R("cpus(B):1;mem(B):1024"))
    allocator.roles.set_quota("B", Quota(R("cpus:1;mem:1024")))
    cycle = OfferCycle(allocator, books, config)
    task = R("cpus:1;mem:1024")
    cycle.wants_offers("B", False)
    for i in range(8):
        slave = f"s{i % 2}"
        book_running(allocator, books, "A", slave, f"t{i}", task, i)
    books.demand["B"] = [(dict(task.millis), 2)]
    cycle.wants_offers("B", True)
    assert not allocator.quota_stage.lack("B")  # the quota stage: B's guarantee is met
    assert cycle.check(0.0).claims == []
    assert cycle.check(5.0).claims == [], "A's tasks preempted for B's met guarantee"
