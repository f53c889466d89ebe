"""Who refuses a slave (`master.allocation.lone`) is kept through changes of who wants
offers: a framework that stops wanting them leaves each slave's refusals, one that starts
(or is revived, its filters cleared) joins them -- where the allocator once dropped them
all. Rounds reading them offer what rounds walking the order every time offer, whatever
frameworks do in between (suppress, revive, deactivate, activate, offer filters that fit
no slave, come and go), and what is kept says what the filters say."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from master.allocation.allocator import Allocator
from master.allocation.ledger import within
from master.allocation.refusing import PASSES
from master.allocation.sorter import Millis
from protocol.wire.resources import Resources

from harness.allocation import agree, answer_both, kept_and_walked, replay, whole_or_nothing

OPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["round", "round", "round", "round", "release", "release", "fw+", "fw-",
             "suppress", "suppress", "revive", "revive", "deactivate", "activate",
             "minimum", "slave+", "wait", "hold"]
        ),
        st.integers(0, 3),
    ),
    max_size=70,
)  # fmt: skip


def kept_as_filters_say(a: Allocator, now: float) -> None:
    """Each slave's refusals read as the round reads them (its free as it was) name every
    framework wanting offers and nobody else, each refusing the slave past `now` exactly
    when its filter there stands and covers what is free."""
    for slave_id, refusals in a._refusing.lone.items():
        if refusals.free != a.slaves[slave_id].unallocated:
            continue  # (read as none: the walk decides)
        who = [fid for _, fid in refusals.lapses]
        assert sorted(who) == sorted(a._wanting), slave_id
        for until, fid in refusals.lapses:
            f = a.frameworks[fid].filters.get(slave_id)
            stands = f is not None and f.expires > now and within(refusals.free, f.refused)
            assert (until > now) == stands, (slave_id, fid)


@settings(max_examples=400, deadline=None)
@given(
    OPS,
    st.sets(st.tuples(st.sampled_from(["f0", "f1", "f2", "f3"]), st.integers(0, 4))),
    st.sampled_from(["drf", "hdrf"]),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_refusals_kept_through_who_wants_offers_offer_what_walking_the_order_would(
    ops: list[tuple[str, int]],
    declining: set[tuple[str, int]],
    policy: str,
    refuse_released: bool,
    simulated: bool,
    lean: bool,
) -> None:
    """The same offers, declined or not, in the same order, the same filters, books and
    order, as an allocator keeping no refusals; rounds of the slaves worth a visit
    (`lean`) or of every one."""

    def declines(framework_id: str, free: Millis) -> bool:  # (a framework's answer)
        return (framework_id, free.get("cpus", 0) // 1000) in declining

    kept, walked = kept_and_walked(policy)
    held: list[tuple[str, str, Resources]] = []
    for op, i, now in replay(ops, (kept, walked), held):
        answer_both(
            kept, walked, op, i, now, held, declines,
            refuse_released=refuse_released, simulated=simulated, full=not lean,
        )  # fmt: skip
        kept_as_filters_say(kept, now)
        agree(kept, walked, now)


def test_a_framework_revived_is_offered_a_slave_the_others_refuse_without_a_walk() -> None:
    """Three frameworks declined a slave; one suppresses (the other two refuse it still)
    and is revived: the round offers the slave to it alone, the others' refusals kept."""
    a = Allocator("drf")
    a.add_slave("s", Resources(cpus=2, mem=200))
    for n in range(3):
        a.add_framework(f"f{n}", role=f"r{n}")
    asked: list[str] = []

    def declines(framework_id: str, free: Millis) -> bool:
        asked.append(framework_id)
        return True

    assert a.allocate(0.0, at_once=whole_or_nothing(declines, 10)) == []
    assert sorted(asked) == ["f0", "f1", "f2"]
    asked.clear()
    a.suppress("f1")
    assert sorted(fid for _, fid in a._refusing.lone["s"].lapses) == ["f0", "f2"]
    a.revive("f1")
    assert a.allocate(1.0, at_once=whole_or_nothing(declines, 10)) == []
    assert asked == ["f1"]  # (f0 and f2 refuse it still: not asked)
    assert a._refusing.lone["s"].all_refuse(1.0)


def test_a_framework_that_suppressed_is_not_asked_once_its_filter_alone_lapses() -> None:
    """f0's filter on a slave lapses before f1's; f0 suppressed meanwhile: the round asks
    nobody (f1 refuses it still), where before f0 was the one it would ask."""
    a = Allocator("drf")
    a.add_slave("s", Resources(cpus=2, mem=200))
    for n in range(2):
        a.add_framework(f"f{n}", role=f"r{n}")
    asked: list[str] = []

    def declines(framework_id: str, free: Millis) -> bool:
        asked.append(framework_id)
        return True

    assert a.allocate(0.0, at_once=whole_or_nothing(declines, 3)) == []  # (both until 3)
    a.revive("f1")  # (its filter cleared: it is asked again, alone)
    assert a.allocate(1.0, at_once=whole_or_nothing(declines, 3)) == []  # (f1 until 4)
    assert asked == ["f0", "f1", "f1"] or asked == ["f1", "f0", "f1"]
    asked.clear()
    a.suppress("f0")
    assert a.allocate(3.5, ["s"], at_once=whole_or_nothing(declines, 3)) == []
    assert asked == []
    assert [fid for _, fid in a._refusing.lone["s"].lapses] == ["f1"]


def test_many_frameworks_reviving_between_two_rounds_cost_a_few_passes_at_most() -> None:
    """Every slave's refusals are passed over for each framework that starts or stops
    wanting offers, at most PASSES times between two rounds: past that they are dropped
    (the round walks the order for those slaves, as it did without them), and the next
    round keeps them again."""
    a = Allocator("drf")
    for s in range(20):
        a.add_slave(f"s{s}", Resources(cpus=1, mem=100))
    for n in range(10):
        a.add_framework(f"f{n}", role=f"r{n}")

    def declines(framework_id: str, free: Millis) -> bool:
        return True

    a.allocate(0.0, at_once=whole_or_nothing(declines, 10))
    assert len(a._refusing.lone) == 20
    for n in range(PASSES):
        a.revive(f"f{n}")
    assert len(a._refusing.lone) == 20  # (kept: each revived joined every slave's)
    a.revive(f"f{PASSES}")
    assert a._refusing.lone == {}
    a.allocate(1.0, at_once=whole_or_nothing(declines, 10))
    assert len(a._refusing.lone) == 20
    assert a._refusing.passes == PASSES
