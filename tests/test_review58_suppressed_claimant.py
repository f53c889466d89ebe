"""Review 58: a claimant whose freed room is never offered to it because it keeps its
offers suppressed (Suppress, then Request again: the master keeps the new demand and the
suppression; or a multi-role framework suppressed in its first role, where preemption's
hold goes) has others' tasks killed again and again: `ClaimUse` counts a claim "neither
way" when its room was never offered, whatever kept the offer from the claimant."""

from __future__ import annotations

from master.allocation.allocator import Allocator
from master.allocation.claim_use import FIRST_WAIT
from master.allocation.planning import RunningTask
from master.allocation.preemption import PreemptionConfig
from master.cycle import CycleConfig, OfferCycle

from harness.cycle import SLAVE, TASK, Books, book_running, end_kills, hog_and_claimant


def test_a_suppressed_claimant_has_others_tasks_killed_claim_after_claim() -> None:
    _, books, cycle = hog_and_claimant(2, 2)  # A fills both slaves; B declares two tasks
    cycle.wants_offers("B", False)  # suppressed, its demand declared
    now, claims, killed = 0.0, [], 0
    while now < FIRST_WAIT:  # a check a second, as the master's (its interval: 1 s here)
        plan = cycle.check(now)
        claims += [now for c in plan.claims if c.claimant == "B"]
        killed += end_kills(cycle, books, now)  # once the hold is over A takes the room back
        offers = cycle.round(now).offers
        assert all(o.framework_id != "B" for o in offers)  # (suppressed: never offered)
        for o in offers:  # A launches in what it is offered back
            cycle.allocator.recover(o.framework_id, o.slave_id, o.resources)
            cycle.allocator.allocate_existing("A", o.slave_id, TASK)
            books.tasks[("A", f"again{now}")] = RunningTask(
                "A", f"again{now}", o.slave_id, dict(TASK.millis), now
            )
        now += 1.0
    assert len(claims) <= 1, (
        f"{len(claims)} claims for B in {FIRST_WAIT:g}s ({killed} of A's tasks killed) at "
        f"{claims}: B never ran a task, yet waited for none of them"
    )


def test_a_multi_role_claimant_suppressed_in_its_first_role_alone_does_the_same() -> None:
    """No trick needed for a multi-role framework: the hold goes to its first role's
    client (`Allocator.reserve`: `clients.first`), and a Suppress naming that role alone
    leaves its demand (cleared only by a Suppress of every role) and its other role's
    offers. The hold is never offered; the room comes to it in its other role only after
    the claim was judged "never offered" -- it declines it there, and claims again."""
    config = CycleConfig(preemption=PreemptionConfig(timeout=5.0, notice=2.0))
    allocator, books = Allocator("drf"), Books()
    allocator.add_framework("A", "a")
    allocator.add_framework("B", "b1", roles=["b1", "b2"])
    books.roles.update({"A": "a", "B": "b1"})
    for i in range(2):
        allocator.add_slave(f"s{i}", SLAVE)
    cycle = OfferCycle(allocator, books, config)
    for i in range(8):
        slave = f"s{i % 2}"
        book_running(allocator, books, "A", slave, f"t{i}", TASK, i)
    books.demand["B"] = [(dict(TASK.millis), 2)]
    cycle.suppress("B", ["b1"])  # (its first role alone: it still wants offers in b2)
    now, claims, killed = 0.0, [], 0
    while now < FIRST_WAIT:
        plan = cycle.check(now)
        claims += [now for c in plan.claims if c.claimant == "B"]
        killed += end_kills(cycle, books, now)  # once the hold is over A takes the room back
        for o in cycle.round(now).offers:
            if o.framework_id == "B":  # (in b2: declined)
                allocator.recover(
                    "B", o.slave_id, o.resources, role=o.role, refuse_seconds=30.0, now=now
                )
                continue
            allocator.recover(o.framework_id, o.slave_id, o.resources)
            book_running(allocator, books, "A", o.slave_id, f"again{now}", TASK, now)
        now += 1.0
    assert len(claims) <= 1, (
        f"{len(claims)} claims for B in {FIRST_WAIT:g}s ({killed} of A's tasks killed) at "
        f"{claims}: B declined every offer, yet waited for none of them"
    )
