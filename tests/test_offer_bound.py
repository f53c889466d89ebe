"""A framework holds at most MAX_OFFERS_HELD offers (the round shell's bound, not the
allocation policy's): what a round would give it past that goes back to the pool, kept
from it a while, and so to the other frameworks."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
from test_master import Cluster

import master.offer_bound as offer_bound
from protocol.wire.resources import Resources

from helpers import eventually


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
