"""A framework holds at most MAX_OFFERS_HELD offers (the round shell's bound, not the
allocation policy's): what a round would give it past that goes back to the pool, kept
from it a while, and so to the other frameworks."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import master.cycle.offer_bound as offer_bound
from master.allocation.allocator import Allocator
from master.allocation.offer_room import RETRY as ROOM_RETRY
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.master import Cluster


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        await c.start_master()
        yield c


async def test_a_framework_holds_at_most_the_bound_and_the_rest_goes_to_others(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(offer_bound, "MAX_OFFERS_HELD", 3)
    for i in range(8):
        await cluster.slave(f"s{i}", Resources(cpus=1, mem=64))
    await eventually(lambda: len(cluster.master.books.slaves) == 8)
    a = await cluster.framework("A")
    await eventually(lambda: a.offer_count() == 3)
    await cluster.rounds_pass(5)
    fw_a = next(f for f in cluster.master.books.frameworks.values() if f.name == "A")
    assert len(fw_a.offers) == a.offer_count() == 3  # never more, round after round
    # an offer answered makes room for one more, not more
    first = await a.next_offer()
    await a.decline(first, refuse=60)
    await eventually(lambda: a.offer_count() == 4)
    await cluster.rounds_pass(5)
    assert len(fw_a.offers) == 3
    # the slaves held back from A are offered to B
    b = await cluster.framework("B")
    await eventually(lambda: b.offer_count() == 3)
    held = {o.slave_id for o in cluster.master.books.offers.values()}
    assert len(held) == 6


def test_a_round_passes_a_framework_by_at_its_room_and_gives_the_slaves_to_others() -> None:
    """The policy's side: a framework at its room leaves the order for the rest of the
    round, so its slaves go to the others in the same round (nothing allocated to it and
    given back), it is back in the order after it, and what nobody took is looked at
    again once the room may have changed."""
    allocator = Allocator("drf")
    for name in ("A", "B"):
        allocator.add_framework(name, name)
    for i in range(8):
        allocator.add_slave(f"s{i}", Resources(cpus=1, mem=64))
    first = allocator.allocate(0.0, room={"A": 3})
    by = Counter(a.framework_id for a in first)
    assert by == {"A": 3, "B": 5}
    assert sorted(allocator.order()) == ["A", "B"]  # A is back in the order

    allocator.suppress("B")
    for a in first[:2]:  # two slaves come back; A has no room for them
        allocator.recover(a.framework_id, a.slave_id, a.resources, refuse_seconds=0, now=0)
    assert allocator.allocate(1.0, room={"A": 0}) == []
    assert allocator.allocate(2.0, room={"A": 5}) == []  # not before the retry
    again = allocator.allocate(1.0 + ROOM_RETRY, room={"A": 5})
    assert [a.framework_id for a in again] == ["A", "A"]


@settings(max_examples=200, deadline=None)
@given(
    rooms=st.lists(st.one_of(st.none(), st.integers(0, 4)), min_size=1, max_size=5),
    slaves=st.integers(1, 12),
    policy=st.sampled_from(["drf", "hdrf"]),
)
def test_no_framework_is_given_past_its_room_and_no_slave_is_left_while_one_has_room(
    rooms: list[int | None], slaves: int, policy: str
) -> None:
    allocator = Allocator(policy)
    room = {}
    for i, r in enumerate(rooms):
        allocator.add_framework(f"f{i}", f"r{i % 2}")
        if r is not None:
            room[f"f{i}"] = r
    for i in range(slaves):
        allocator.add_slave(f"s{i}", Resources(cpus=1, mem=64))
    given = allocator.allocate(0.0, room=room)
    by = Counter(a.framework_id for a in given)
    assert all(by[f] <= r for f, r in room.items())
    assert len({a.slave_id for a in given}) == len(given)  # nothing allocated twice
    if len(given) < slaves:  # a slave left over: every framework is at its room
        assert all(f in room and by[f] == room[f] for f in (f"f{i}" for i in range(len(rooms))))
    assert sorted(allocator.order()) == sorted(f"f{i}" for i in range(len(rooms)))
