"""Review 59: a tenant's framework that leaves before its claim is judged takes the claim
with it: `ClaimUse.forget` drops a removed framework's claim unjudged, so no unused claim
is ever counted against its tenant. The tenant declares demand in a framework, has
another tenant's tasks killed for it, tears the framework down while the room is held for
it (never offered it, never used), subscribes another under the same principal with the
same demand, and claims again after one starvation timeout: review 58's wait for a new
framework of the same principal (`tests/test_review58_claim_wait_new_id.py`) is never
reached, for no claim is ever judged.

On the offer cycle with the books in memory (the harness of
tests/test_review58_suppressed_claimant.py), a check and a round a second; the master's
teardown is `OfferCycle.forget` and `Allocator.remove_framework`."""

from __future__ import annotations

from collections.abc import Iterator

from master.allocation.allocator import Allocator
from master.allocation.preemption import PreemptionConfig
from master.cycle import CycleConfig, OfferCycle, Wish

from harness.cycle import SLAVE, TASK, Books, book_running, end_kills, hog_fills

WINDOW = 600.0


class Tenants(Books):
    """Each framework's principal: its role's name."""

    def wishes(self, now: float) -> Iterator[Wish]:
        for fid, role in self.roles.items():
            yield Wish(fid, role, demand=self.demand.get(fid), tenant=role)


def test_a_framework_that_leaves_with_its_claim_unjudged_leaves_its_tenant_no_wait() -> None:
    config = CycleConfig(preemption=PreemptionConfig(timeout=5.0, notice=2.0))
    allocator, books = Allocator("drf"), Tenants()
    allocator.add_framework("A", "a")
    books.roles["A"] = "a"
    for i in range(2):
        allocator.add_slave(f"s{i}", SLAVE)
    cycle = OfferCycle(allocator, books, config)
    for i in range(8):  # A (honest) fills both slaves
        slave = f"s{i % 2}"
        book_running(allocator, books, "A", slave, f"t{i}", TASK, i)

    def subscribe(n: int) -> str:
        fid = f"M{n}"
        allocator.add_framework(fid, "m")
        books.roles[fid] = "m"  # (principal mallory, role m)
        books.demand[fid] = [(dict(TASK.millis), 1)]
        return fid

    frameworks = 0
    mallory = subscribe(frameworks)
    now, claims, killed = 0.0, [], 0
    while now < WINDOW:
        plan = cycle.check(now)
        claimed = [c for c in plan.claims if c.claimant == mallory]
        claims += [now for _ in claimed]
        killed += end_kills(cycle, books, now)
        if claimed:  # torn down at once, its claim unjudged; the next one subscribes
            cycle.forget(mallory, now)  # (as the master tells it: when)
            allocator.remove_framework(mallory)
            del books.roles[mallory], books.demand[mallory]
            frameworks += 1
            mallory = subscribe(frameworks)
        for o in cycle.round(now).offers:
            if o.framework_id.startswith("M"):
                allocator.recover(
                    o.framework_id, o.slave_id, o.resources, refuse_seconds=5.0, now=now
                )
                continue
            hog_fills(cycle, books, o, now)  # A launches again
        now += 1.0
    # a tenant that leaves claims unused waits 60 s, 120 s, 240 s...: 4 claims in 600 s
    assert len(claims) <= 4, (
        f"{len(claims)} claims for mallory's {frameworks + 1} frameworks in {WINDOW:g}s "
        f"({killed} of A's tasks killed), none of them ever launched: each left before "
        f"its claim was judged"
    )
