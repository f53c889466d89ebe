"""The round's fast paths decide as the plain rules say (issue 46: the simulator's speed).

A round asks each framework, in order, whether it wants a slave without calling
`ledger.wants_offer` (its own offer filters, or the master's minimum, and its decline
filter, inlined), and skips a slave that holds none of the frameworks' offer filters
without asking whether anything is free; whether every framework refuses a slave stops at
the first that does not. Each is held here to the rule it stands for, on random books."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from master.allocation.allocator import Allocator
from master.allocation.ledger import (
    Filter,
    FrameworkBook,
    SlaveBook,
    declined_by_all,
    master_floor,
    wants_offer,
    within,
)
from protocol.wire.resources import Resources

SIZES = st.sampled_from([(0.5, 128), (1, 512), (2, 1024), (3, 3000), (0.005, 16)])
SLAVES = st.sampled_from([(4, 4096), (1, 1024), (2, 512), (0.5, 4096), (1.01, 40)])
MASTER_MINIMUMS = st.sampled_from(
    [None, [], [(1, 0)], [(0, 1024)], [(0.5, 256)], [(1, 0), (0, 1024)]]
)
CHANGES = st.sampled_from(
    ["suppress", "revive", "deactivate", "activate", "own filters", "master's", "anything"]
)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_round_offers_a_slave_to_the_first_framework_in_order_that_wants_it(
    data: st.DataObject,
) -> None:
    """On slaves of several sizes, nearly full after several launches an offer, with the
    master's minimum drawn too, and frameworks suppressing, reviving, leaving, coming
    back and changing their offer filters between rounds."""
    minimum = data.draw(MASTER_MINIMUMS, label="master's minimum")
    master_min = None if minimum is None else [Resources(cpus=c, mem=m) for c, m in minimum]
    a = Allocator("drf", min_allocatable=master_min)
    floor = master_floor(None if master_min is None else [dict(r.millis) for r in master_min])
    count = data.draw(st.integers(1, 4), label="frameworks")
    shared = data.draw(st.booleans(), label="one role shared")
    ids = [f"f{i}" for i in range(count)]
    for i, fid in enumerate(ids):
        a.add_framework(fid, role="r" if shared else f"r{i}")
        set_minimum(a, fid, data)
    for s in range(3):
        cpus, mem = data.draw(SLAVES, label=f"s{s}")
        a.add_slave(f"s{s}", Resources(cpus=cpus, mem=mem))
    now = 0.0
    for _ in range(data.draw(st.integers(0, 6), label="rounds")):
        for offer in a.allocate(now):
            rest = offer.resources
            for _ in range(data.draw(st.integers(0, 3), label="launches")):
                cpus, mem = data.draw(SIZES, label="used")
                used = Resources(cpus=cpus, mem=mem)
                if rest.contains(used):
                    rest = rest - used
            if rest:  # (the rest declined, filtered a while or not at all)
                refuse = data.draw(st.sampled_from([None, 0.5, 1.0, 5.0]), label="refuse")
                a.recover(offer.framework_id, offer.slave_id, rest, refuse_seconds=refuse, now=now)
        if data.draw(st.booleans(), label="a task ends"):
            fid = data.draw(st.sampled_from(ids), label="whose")
            for sid in sorted(a.frameworks[fid].slaves):
                a.recover(fid, sid, a.held(fid, sid))
                break
        if data.draw(st.booleans(), label="a framework changes"):
            fid = data.draw(st.sampled_from(ids), label="which")
            change = data.draw(CHANGES, label="how")
            if change in ("suppress", "revive", "deactivate", "activate"):
                getattr(a, change)(fid)
            else:
                set_minimum(a, fid, data, change)
        now += data.draw(st.sampled_from([0.25, 1.0, 3.0]), label="time passes")
    slave_id = data.draw(st.sampled_from(sorted(a.slaves)), label="slave")
    free = dict(a.slaves[slave_id].unallocated)
    books = copy.deepcopy(a.frameworks)  # (wants_offer drops filters that lapsed)
    wanting = [
        f
        for f in a.order()
        if not books[f].suppressed and wants_offer(books[f], slave_id, free, now, floor)
    ]
    offers = a.allocate(now, [slave_id])
    if not wanting:
        assert offers == []
    else:
        assert [(o.framework_id, o.resources) for o in offers] == [
            (wanting[0], Resources.from_millis(free))
        ]


def test_a_decline_still_stands_once_less_is_free_than_was_declined() -> None:
    """f0 declines the whole slave for 5 s; f1 takes part of it and declines the rest:
    what is free now lies within what f0 declined, so neither is offered it."""
    a = Allocator("drf")
    for fid in ("f0", "f1"):
        a.add_framework(fid, role=fid)
    a.add_slave("s", Resources(cpus=4, mem=4096))
    [first] = a.allocate(0.0)
    a.recover(first.framework_id, "s", first.resources, refuse_seconds=5.0, now=0.0)
    [second] = a.allocate(0.5)
    assert second.framework_id != first.framework_id
    rest = second.resources - Resources(cpus=1, mem=1024)
    a.recover(second.framework_id, "s", rest, refuse_seconds=5.0, now=0.5)
    assert a.allocate(1.0, ["s"]) == []


def set_minimum(a: Allocator, fid: str, data: st.DataObject, kind: str | None = None) -> None:
    """A framework's offer filters: none (the master's minimum), empty (anything), or its
    own sizes."""
    if kind is None:
        kind = data.draw(st.sampled_from(["master's", "anything", "own filters"]), label="minimum")
    if kind == "master's":
        a.set_min_allocatable(fid, None)
    elif kind == "anything":
        a.set_min_allocatable(fid, [])
    else:
        sizes = data.draw(st.lists(SIZES, min_size=1, max_size=2), label=f"{fid} filters")
        a.set_min_allocatable(fid, [Resources(cpus=c, mem=m) for c, m in sizes])


FILTERS = st.one_of(
    st.none(),
    st.tuples(st.sampled_from([0.5, 2.0]), st.sampled_from([(1, 512), (2, 1024), (4, 4096)])),
)


@settings(max_examples=200, deadline=None)
@given(
    filters=st.lists(FILTERS, min_size=1, max_size=5),
    wanting=st.lists(st.booleans(), min_size=5, max_size=5),
    counted=st.lists(st.booleans(), min_size=5, max_size=5),
    free=st.sampled_from([(1, 512), (2, 1024), (2, 2048), (0, 0)]),
)
def test_every_framework_refuses_a_slave_when_each_wanting_offers_declined_it_still(
    filters: list[tuple[float, tuple[float, int]] | None],
    wanting: list[bool],
    counted: list[bool],
    free: tuple[float, int],
) -> None:
    now = 1.0
    slave = SlaveBook("s", Resources(cpus=4, mem=4096))
    books = {}
    for i, f in enumerate(filters):
        fw = books[f"f{i}"] = FrameworkBook(f"f{i}", f"r{i}")
        if f is not None:
            expires, (cpus, mem) = f
            fw.filters["s"] = Filter(expires, dict(Resources(cpus=cpus, mem=mem).millis))
    have = dict(Resources(cpus=free[0], mem=free[1]).millis)
    want = {fid: fw for (fid, fw), w in zip(books.items(), wanting, strict=False) if w}

    def refuses(fw: FrameworkBook) -> bool:
        f = fw.filters.get("s")
        return f is not None and f.expires > now and within(have, f.refused)

    refusing = {fid for fid, fw in want.items() if refuses(fw)}
    # who declined it since last counted: at least every framework refusing it now
    slave.refused_by = refusing | {f for f, c in zip(books, counted, strict=False) if c}
    assert declined_by_all(slave, want, have, now) == (len(refusing) == len(want))
    assert slave.refused_by >= refusing  # (still counted: the next count may skip no one)
