"""A newcomer following the reservations how-to ("`drfmesos why FRAMEWORK_ID`: a framework
of another role: what is reserved, and for whom") ran `drfmesos run --cpus 1` in its own
role while every unreserved cpu was in use and a slave's 3 cpus were free but reserved
for `team-a`. `drfmesos why` answered only `min-offer-fits-no-slave` ("the most any slave
has free: cpus:0;mem:1920") and never that cpus are free but reserved for another role:
the slave's unreserved memory was free, so the reservation's stage was passed and the
slave counted against the min_offer alone."""

from __future__ import annotations

from master.allocation.allocator import Allocator
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources
from protocol.wire.why_codes import WhyCode

from harness.cycle import Books


def test_why_says_the_cpus_a_min_offer_needs_are_reserved_for_another_role() -> None:
    allocator, books = Allocator("drf"), Books()
    for name, role in {"mine": "team-a", "busy": "busy", "want": "want"}.items():
        allocator.add_framework(name, role)
        books.roles[name] = role
    allocator.add_slave("s0", Resources.parse("cpus(team-a):2;mem(team-a):1024;cpus:1;mem:2048"))
    allocator.allocate_existing("busy", "s0", Resources.parse("cpus:1;mem:128"))
    allocator.suppress("mine")
    allocator.set_min_allocatable("want", [Resources.parse("cpus:1;mem:64")])
    cycle = OfferCycle(allocator, books, CycleConfig())
    reasons, _ = cycle.why("want", 1.0)
    codes = [r.code for r in reasons]
    assert WhyCode.RESERVED_FOR_OTHERS in codes, [(r.code, r.message) for r in reasons]
