"""Why a framework is offered nothing (`master.cycle.why`), in process on books kept in
memory: each reason where it explains, first, with numbers that are true of the books;
and, for any cluster, every framework a round passed over has a reason, and none of them
is told the next round will offer it what that round just kept from it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from master.allocation.allocator import Allocator
from master.allocation.fair_shares import fair_allocation
from master.allocation.ledger import allocatable, fits_one
from master.allocation.quota import Quota
from master.cycle import CycleConfig, OfferCycle
from master.cycle.why import Reason, Standing
from protocol.wire.resources import Limit, Resources
from protocol.wire.why_codes import WhyCode

from harness.cycle import Books, Offer

SLAVE = Resources(cpus=4, mem=4096)


def cycle_of(frameworks: dict[str, str], slaves: int) -> tuple[OfferCycle, Books]:
    allocator, books = Allocator("drf"), Books()
    for name, role in frameworks.items():
        allocator.add_framework(name, role)
        books.roles[name] = role
    for i in range(slaves):
        allocator.add_slave(f"s{i}", SLAVE)
    return OfferCycle(allocator, books, CycleConfig()), books


def keep(cycle: OfferCycle, books: Books, now: float) -> None:
    """A round, its offers kept outstanding (as a master keeps them)."""
    for i, a in enumerate(cycle.round(now).offers):
        oid = f"o{now}-{i}"
        books.offers[oid] = Offer(oid, a.framework_id, a.slave_id, a.resources, now)


def launch_all(cycle: OfferCycle, books: Books) -> None:
    """Every outstanding offer used whole (its resources stay allocated, as tasks')."""
    books.offers.clear()


def top(cycle: OfferCycle, fid: str, now: float, **standing: object) -> Reason:
    reasons, _ = cycle.why(fid, now, Standing(**standing) if standing else None)  # type: ignore[arg-type]
    assert reasons, f"{fid} has no reason"
    return reasons[0]


# -- each reason, first where it explains ----------------------------------------------------------
def test_no_slave() -> None:
    cycle, _ = cycle_of({"a": "a"}, 0)
    r = top(cycle, "a", 0.0)
    assert r.code == WhyCode.NO_SLAVE
    assert r.numbers["slaves"] == 0
    cycle.allocator.add_slave("s0", SLAVE)
    cycle.allocator.deactivate_slave("s0")
    r = top(cycle, "a", 0.0)
    assert r.code == WhyCode.NO_SLAVE
    assert r.numbers == {"slaves": 1, "connected": 0}


def test_suppressed_and_disconnected() -> None:
    cycle, _ = cycle_of({"a": "a"}, 1)
    cycle.suppress("a")
    assert top(cycle, "a", 0.0).code == WhyCode.SUPPRESSED
    cycle.allocator.deactivate("a")
    assert top(cycle, "a", 0.0).code == WhyCode.DISCONNECTED


def test_rate_limited_and_role_refused_come_from_the_shell() -> None:
    cycle, _ = cycle_of({"a": "a"}, 1)
    r = top(cycle, "a", 0.0, calls_queued=7, calls_refused=2, qps=1.0, capacity=5)
    assert r.code == WhyCode.RATE_LIMITED
    assert r.numbers == {"queued": 7, "refused": 2, "qps": 1.0, "capacity": 5}
    r = top(cycle, "a", 0.0, role_refused="principal p may not register in role 'a'")
    assert r.code == WhyCode.ROLE_NOT_ALLOWED
    assert "may not register" in r.message


def test_a_zero_limit_freezes_the_role() -> None:
    cycle, _ = cycle_of({"a": "a"}, 1)
    cycle.allocator.roles.set_quota("a", Quota(Resources(), Limit(cpus=0)))
    r = top(cycle, "a", 0.0)
    assert r.code == WhyCode.ROLE_NOT_ALLOWED
    assert r.numbers["limit"] == {"cpus": 0.0}


def test_min_offer_larger_than_any_slave_names_the_resource_short() -> None:
    cycle, _ = cycle_of({"a": "a"}, 2)
    cycle.allocator.set_min_allocatable("a", [Resources(cpus=6, mem=1024)])
    keep(cycle, Books(), 0.0)
    r = top(cycle, "a", 1.0)
    assert r.code == WhyCode.MIN_OFFER_FITS_NO_SLAVE
    assert r.numbers["short"] == {"cpus": 2.0}
    assert r.numbers["largest"] == {"cpus": 4.0, "mem": 4096.0}
    assert r.numbers["of"] == "total"


def test_a_task_larger_than_any_slave() -> None:
    cycle, books = cycle_of({"a": "a"}, 2)
    books.demand["a"] = [({"cpus": 2000, "mem": 8192_000}, 3)]
    keep(cycle, books, 0.0)
    r = top(cycle, "a", 1.0)
    assert r.code == WhyCode.TASK_FITS_NO_SLAVE
    assert r.numbers["short"] == {"mem": 4096.0}
    assert r.numbers["need"] == {"cpus": 2.0, "mem": 8192.0}


def test_of_many_shapes_the_smallest_few_are_weighed_and_that_is_said() -> None:
    """A Request of 100 shapes (or a min_offer of 20): an answer weighs the SHAPES_WEIGHED
    smallest distinct ones (each is asked of every slave), and says how many it did not."""
    cycle, books = cycle_of({"a": "a", "b": "b"}, 2)
    books.demand["a"] = [({"cpus": 1000, "mem": (4096 + 100 - i) * 1000}, 1) for i in range(100)]
    cycle.allocator.set_min_allocatable(
        "b",
        [Resources(cpus=5 + i % 10) for i in range(20)],  # (10 distinct)
    )
    keep(cycle, books, 0.0)
    r = top(cycle, "a", 1.0)
    assert r.code == WhyCode.TASK_FITS_NO_SLAVE
    assert r.numbers["need"] == {"cpus": 1.0, "mem": 4097.0}  # the smallest of them
    assert (r.numbers["shapes"], r.numbers["weighed"]) == (100.0, 5.0)
    assert "the 5 smallest of its 100 shapes weighed" in r.message
    r = top(cycle, "b", 1.0)
    assert r.code == WhyCode.MIN_OFFER_FITS_NO_SLAVE
    assert r.numbers["need"] == {"cpus": 5.0}
    assert (r.numbers["shapes"], r.numbers["weighed"]) == (10.0, 5.0)


def test_a_task_one_of_whose_shapes_fits_is_not_said_to_fit_nowhere() -> None:
    """Shapes past every slave are left out of what each slave is asked: one that fits
    some slave is still weighed, however many others do not."""
    cycle, books = cycle_of({"a": "a"}, 2)
    books.demand["a"] = [({"mem": (8192 + i) * 1000}, 1) for i in range(99)]
    books.demand["a"].append(({"cpus": 1000, "mem": 1024_000}, 1))
    reasons, _ = cycle.why("a", 1.0)
    assert WhyCode.TASK_FITS_NO_SLAVE not in {r.code for r in reasons}


def test_what_is_free_too_small_for_its_task_explains_before_its_filter() -> None:
    """Crumbs it was offered and declined: that they hold none of its tasks is what
    explains (a filter lapsing would bring back only the same crumbs)."""
    cycle, books = cycle_of({"a": "a", "b": "b"}, 1)
    a = cycle.allocator
    a.allocate_existing("b", "s0", Resources(cpus=3, mem=1024))  # b's tasks run there
    books.demand["a"] = [({"cpus": 2000, "mem": 512_000}, 1)]
    for o in cycle.round(0.0).offers:
        cycle.decline(o.framework_id, o.slave_id, o.resources, 30.0, 0.0)
    r = top(cycle, "a", 1.0)
    assert r.code == WhyCode.TASK_FITS_NO_SLAVE
    assert r.numbers["short"] == {"cpus": 1.0}
    assert r.numbers["of"] == "free"


def test_offers_outstanding() -> None:
    cycle, books = cycle_of({"a": "a"}, 3)
    keep(cycle, books, 0.0)
    r = top(cycle, "a", 4.0)
    assert r.code == WhyCode.OFFERS_OUTSTANDING
    assert r.numbers["offers"] == 3
    assert r.numbers["oldest_seconds"] == 4.0
    assert r.numbers["resources"] == {"cpus": 12.0, "mem": 12288.0}
    _, offered = cycle.why("a", 4.0)
    assert {o.offer.slave_id for o in offered} == {"s0", "s1", "s2"}
    assert all(o.at == 0.0 for o in offered)


def test_declined_filter_says_which_slaves_until_when() -> None:
    cycle, _books = cycle_of({"a": "a"}, 2)
    for a in cycle.round(0.0).offers:
        cycle.decline(a.framework_id, a.slave_id, a.resources, 30.0, 0.0)
    assert not cycle.round(1.0).offers
    r = top(cycle, "a", 10.0)
    assert r.code == WhyCode.DECLINED_FILTER
    assert r.numbers["until"] == {"s0": 20.0, "s1": 20.0}
    cycle.revive("a")
    assert top(cycle, "a", 10.0).code == WhyCode.NEXT_ROUND


def test_quota_limit_with_limit_and_what_it_holds() -> None:
    cycle, books = cycle_of({"a": "a"}, 2)
    cycle.allocator.roles.set_quota("a", Quota(Resources(), Limit(cpus=4)))
    keep(cycle, books, 0.0)
    launch_all(cycle, books)
    r = top(cycle, "a", 1.0)
    assert r.code == WhyCode.QUOTA_LIMIT
    assert r.numbers["limit"] == {"cpus": 4.0}
    assert r.numbers["held"] == {"cpus": 4.0, "mem": 8192.0}


def test_held_for_guarantee_names_the_roles() -> None:
    cycle, books = cycle_of({"a": "a", "b": "b"}, 2)
    cycle.allocator.roles.set_quota("b", Quota(Resources(cpus=4, mem=4096)))
    cycle.suppress("b")  # guaranteed, and not asking now: its guarantee is still held back
    keep(cycle, books, 0.0)
    launch_all(cycle, books)
    r = top(cycle, "a", 1.0)
    assert r.code == WhyCode.HELD_FOR_GUARANTEE
    assert r.numbers["roles"] == ["b"]
    assert r.numbers["held_back"] == {"cpus": 4.0, "mem": 4096.0}


def test_a_tenant_hears_other_roles_counted_not_named() -> None:
    cycle, books = cycle_of({"a": "a", "b": "b"}, 2)
    cycle.allocator.roles.set_quota("b", Quota(Resources(cpus=4, mem=4096)))
    cycle.suppress("b")
    keep(cycle, books, 0.0)
    launch_all(cycle, books)
    reasons, _ = cycle.why("a", 1.0, others_named=False)
    assert reasons[0].code == WhyCode.HELD_FOR_GUARANTEE
    assert reasons[0].numbers == {"held_back": {"cpus": 4.0, "mem": 4096.0}, "roles": 1.0}
    assert reasons[0].message.endswith(
        "kept for 1 other role(s)' guarantees (cpus:4;mem:4096 in all)"
    )


def test_lower_in_order_and_cluster_full() -> None:
    cycle, books = cycle_of({"a": "a", "b": "b"}, 3)
    keep(cycle, books, 0.0)  # a: 2 slaves, b: 1 (or the other way round)
    launch_all(cycle, books)
    a = cycle.allocator
    # fair shares as the master keeps them (computed off its loop): why reads, not computes
    cycle.preemption.set_fair(fair_allocation("drf", dict(a.total.millis), cycle.contenders(1.0)))
    more, less = sorted("ab", key=a.dominant_share, reverse=True)
    r = top(cycle, more, 1.0)
    assert r.code == WhyCode.LOWER_IN_ORDER
    assert r.numbers["position"] == 2
    assert r.numbers["ahead"] == {less: round(1 / 3, 4)}
    assert r.numbers["dominant_share"] == round(2 / 3, 4)
    assert r.numbers["fair_share"] == 0.5
    r = top(cycle, less, 1.0)
    assert r.code == WhyCode.CLUSTER_FULL
    assert r.numbers["position"] == 1


def test_held_for_preemption() -> None:
    cycle, _books = cycle_of({"a": "a", "b": "b"}, 1)
    cycle.allocator.reserve("s0", "b", SLAVE, until=100.0)
    assert top(cycle, "a", 1.0).code == WhyCode.HELD_FOR_PREEMPTION
    assert top(cycle, "b", 1.0).code == WhyCode.NEXT_ROUND


# -- any cluster ---------------------------------------------------------------------------------
FRAMEWORKS = st.dictionaries(
    st.sampled_from("abcdef"), st.sampled_from(["r1", "r2", "r3"]), min_size=1, max_size=5
)


@st.composite
def clusters(draw: st.DrawFn) -> tuple[OfferCycle, Books]:
    frameworks = draw(FRAMEWORKS)
    cycle, books = cycle_of(frameworks, draw(st.integers(0, 5)))
    a = cycle.allocator
    for fid in frameworks:
        if draw(st.booleans()):
            cpus = draw(st.integers(1, 8))
            a.set_min_allocatable(fid, [Resources(cpus=cpus, mem=512)])
        if draw(st.booleans()):
            books.demand[fid] = [({"cpus": draw(st.integers(1, 8)) * 1000}, 2)]
        if draw(st.integers(0, 4)) == 0:
            cycle.suppress(fid)
    if draw(st.booleans()):
        a.roles.set_quota("r1", Quota(Resources(), Limit(cpus=draw(st.integers(0, 8)))))
    if draw(st.booleans()):
        a.roles.set_quota("r2", Quota(Resources(cpus=draw(st.integers(1, 8)))))
    return cycle, books


def played(cycle: OfferCycle, books: Books, steps: list[str]) -> float:
    """The cluster after `steps`, a second apart (offers kept, launched on whole, or all
    declined for 5 s): the time of the round to look at next."""
    now = 0.0
    for step in steps:
        now += 1.0
        if step == "keep":
            keep(cycle, books, now)
        elif step == "launch":
            launch_all(cycle, books)
        else:
            for o in list(books.offers.values()):
                cycle.decline(o.framework_id, o.slave_id, o.resources, 5.0, now)
                del books.offers[o.offer_id]
    return now + 1.0


@settings(max_examples=150, deadline=None)
@given(clusters(), st.lists(st.sampled_from(["keep", "launch", "decline"]), max_size=4))
def test_every_framework_passed_over_has_true_reasons(
    drawn: tuple[OfferCycle, Books], steps: list[str]
) -> None:
    cycle, books = drawn
    a = cycle.allocator
    now = played(cycle, books, steps)
    offered = {x.framework_id for x in cycle.round(now).offers}  # (not kept: given back)
    for fid in a.frameworks:
        reasons, _ = cycle.why(fid, now)
        codes = [r.code for r in reasons]
        assert len(codes) == len(set(codes))
        if fid not in offered:
            assert reasons, f"{fid} was passed over with no reason"
            if not a.quotas:  # (a quota-cut offer leaves the rest for the next round)
                assert WhyCode.NEXT_ROUND not in codes, (fid, reasons)
        for r in reasons:
            numbers_are_true(cycle, books, fid, r, now)


@settings(max_examples=150, deadline=None)
@given(clusters(), st.lists(st.sampled_from(["keep", "launch", "decline"]), max_size=4))
def test_the_first_reason_alone_is_the_first_of_all(
    drawn: tuple[OfferCycle, Books], steps: list[str]
) -> None:
    """The simulator asks for the first reason's code at every sample and its sentence only
    the first time (`why_first`): both are the first of the reasons `why` gives."""
    cycle, books = drawn
    now = played(cycle, books, steps)
    cycle.round(now)
    for fid in cycle.allocator.frameworks:
        reasons, _ = cycle.why(fid, now, fair_share=False)
        told = cycle.why_first(fid, now)
        if not reasons:
            assert told is None
            continue
        assert told is not None
        assert told.code == reasons[0].code
        assert told.reason() == reasons[0]


def numbers_are_true(cycle: OfferCycle, books: Books, fid: str, r: Reason, now: float) -> None:
    a = cycle.allocator
    fw = a.frameworks[fid]
    frees = {s: b.unallocated for s, b in a.slaves.items() if b.active}
    if r.code == WhyCode.NO_SLAVE:
        assert not frees
    elif r.code == WhyCode.SUPPRESSED:
        assert fw.suppressed
    elif r.code == WhyCode.MIN_OFFER_FITS_NO_SLAVE:
        named = r.numbers["slaves"]
        assert isinstance(named, list)
        if r.numbers["of"] == "free":
            have = {s: f for s, f in frees.items() if s in named}
        else:
            have = {s: dict(b.total.millis) for s, b in a.slaves.items() if b.active}
        assert not any(fits_one(h, fw.min_allocatable) for h in have.values())
        largest = r.numbers["largest"]
        assert isinstance(largest, dict)
        for name, amount in largest.items():
            assert amount * 1000 == max(h.get(name, 0) for h in have.values())
    elif r.code == WhyCode.DECLINED_FILTER:
        until = r.numbers["until"]
        assert isinstance(until, dict)
        for slave_id, left in until.items():
            assert abs(fw.filters[slave_id].expires - now - left) < 1e-6
            assert left > 0
    elif r.code == WhyCode.OFFERS_OUTSTANDING:
        assert r.numbers["offers"] == sum(o.framework_id == fid for o in books.offers.values())
    elif r.code == WhyCode.QUOTA_LIMIT:
        held = a.roles.held(fw.role)
        at_limit = r.numbers.get("at_limit", [])
        assert isinstance(at_limit, list)
        for name in at_limit:
            limit = a.quotas[fw.role].limit
            assert limit is not None
            assert held.get(name, 0) >= limit.get_millis(name)
    elif r.code in (WhyCode.LOWER_IN_ORDER, WhyCode.CLUSTER_FULL):
        order = list(a.order())
        position = order.index(fid) + 1 if fid in order else len(order) + 1
        assert r.numbers["position"] == position
        assert r.numbers["dominant_share"] == round(a.dominant_share(fid), 4)
        assert any(not allocatable(f) for f in frees.values())
    elif r.code == WhyCode.NEXT_ROUND:
        assert any(allocatable(f) for f in frees.values())
