"""Review 70: an honest framework's offers of its own role's reservation are taken back
as "hoarding" while a framework of another role starves -- a room the starving one can
never use -- and the honest one is kept from its own reservation, longer each time.

`OfferCycle._over_fair_share_while_starving` (971de10): once any framework has starved
past the preemption timeout (and its claims are settled), every framework over its fair
share has its offers older than that timeout rescinded as timed out, refused for
TIMED_OUT_REFUSE (5 s), doubled for each in a row up to 300 s. It asks nothing of what
the offers hold: A, of role `a`, with 6 of the 8 CPUs reserved for `a` (static, on s0),
holds its offer of them (no --offer-timeout: Mesos lets a framework keep an offer, as
Aurora and Marathon do). B, of role `b`, runs 2 tasks on s1 (the only unreserved room)
and declares 4 more: its share 2/8 is below its fair half, nothing free fits it, and A
has no task to preempt -- B starves and never claims. B could not use a single CPU of
A's offer (`room_for`: another role's reservation is no room of B's), yet A's offer is
taken back every few seconds and A kept from its own reservation for 5, 10, 20... s.
A tenant that wants to deny another its reservation needs only to declare a demand.
"""

from __future__ import annotations

from master.allocation.allocator import Allocator
from master.allocation.preemption import PreemptionConfig
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books, Offer, book_running

TASK = Resources(cpus=1, mem=1024)


def test_offers_of_a_reservation_nobody_else_may_use_are_not_taken_back() -> None:
    config = CycleConfig(preemption=PreemptionConfig(timeout=5.0, threshold=1.0, notice=2.0))
    allocator, books = Allocator("drf"), Books()
    for fid, role in (("A", "a"), ("B", "b")):
        allocator.add_framework(fid, role)
        books.roles[fid] = role
    allocator.add_slave("s0", Resources.parse("cpus(a):6;mem(a):6144"))
    allocator.add_slave("s1", Resources.parse("cpus:2;mem:2048"))
    cycle = OfferCycle(allocator, books, config)
    for i in range(2):  # B runs on all the unreserved room, and wants 4 tasks more
        book_running(allocator, books, "B", "s1", f"t{i}", TASK, i)
    books.demand["B"] = [(dict(TASK.millis), 4)]
    rescinded = []
    n = 0
    for second in range(40):  # the master's timers and rounds, a second apart
        now = float(second)
        cycle.check(now)
        for t in cycle.expired(now):
            books.offers.pop(t.offer_id)
            rescinded.append((now, t.framework_id, t.slave_id, t.refuse_seconds))
        for o in cycle.round(now).offers:  # A keeps its offers; B is offered nothing
            n += 1
            books.offers[f"o{n}"] = Offer(
                f"o{n}", o.framework_id, o.slave_id, o.resources, now, o.role
            )
    assert not rescinded, (
        f"A's offers of its own role's reservation taken back while B (role b, which may "
        f"not use them) starved: (time, framework, slave, refused for) {rescinded}"
    )


def test_offers_are_not_taken_back_for_a_framework_no_slave_can_hold() -> None:
    """The same for a demand no slave can ever hold: B declares one task of 5 CPUs on
    slaves of 4. It starves for ever (nothing free fits it) and no claim can be made for
    it (no slave has room for its task, whatever ends), so it is never judged; A's offers
    of every slave are taken back again and again, to be declined by B, and A is kept
    from them 5, 10, 20... s: the cluster stands idle for a task nobody can run."""
    config = CycleConfig(preemption=PreemptionConfig(timeout=5.0, threshold=1.0, notice=2.0))
    allocator, books = Allocator("drf"), Books()
    for fid in ("A", "B"):
        allocator.add_framework(fid, fid)
        books.roles[fid] = fid
    for i in range(2):
        allocator.add_slave(f"s{i}", Resources.parse("cpus:4;mem:4096"))
    cycle = OfferCycle(allocator, books, config)
    books.demand["B"] = [({"cpus": 5000, "mem": 1024000}, 1)]
    rescinded = []
    n = 0
    for second in range(40):  # the master's timers and rounds, a second apart
        now = float(second)
        cycle.check(now)
        for t in cycle.expired(now):
            books.offers.pop(t.offer_id)
            rescinded.append((now, t.framework_id, t.slave_id, t.refuse_seconds))
        for o in cycle.round(now).offers:
            if o.framework_id == "B":  # nothing it can use: declined
                cycle.decline("B", o.slave_id, o.resources, 5.0, now, whole=True)
                continue
            n += 1  # A keeps its offers
            books.offers[f"o{n}"] = Offer(
                f"o{n}", o.framework_id, o.slave_id, o.resources, now, o.role
            )
    assert not rescinded, (
        f"A's offers taken back while B starved for a task of 5 CPUs that no slave of 4 "
        f"can hold: (time, framework, slave, refused for) {rescinded}"
    )
