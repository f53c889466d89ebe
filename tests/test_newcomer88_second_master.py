"""Newcomer 88: a second `drfmesos master` started by mistake on a cluster's broker (no
ZooKeeper) fought the first for ever.

Masters share one client id, so the second connection made the broker close the first;
the first said "this one gives up; ... two masters of one cluster without ZooKeeper?",
and then campaigned again -- a lone master always wins -- took the client id back, and
so on: each in turn lost its term, its books and its frameworks' offers, every few
seconds, for as long as both ran. Without ZooKeeper nothing elects one of two masters,
so the one taken over stops, and says why; the other keeps the cluster.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from master.ha.leadership import LeadershipError, LoneCandidate, Term, lead
from protocol.transport.aio import within
from protocol.transport.base import ConnectedElsewhere
from protocol.transport.bus import BusRefused


class TakenOverBus:
    """Connects; then another process takes its client id over, and it gives up."""

    def __init__(self, refused: BusRefused) -> None:
        self.epoch = 0
        self.may_reconnect: object = None
        self.gave_up = asyncio.Event()
        self.refused = refused

    async def start(self, timeout: float | None = None) -> None:
        pass

    async def close(self, abandon: bool = False) -> None:
        pass


async def test_a_lone_master_taken_over_by_another_stops_instead_of_taking_it_back() -> None:
    buses: list[TakenOverBus] = []

    def make_bus() -> TakenOverBus:
        buses.append(TakenOverBus(ConnectedElsewhere("client id taken over")))
        return buses[-1]

    async def serve(bus: TakenOverBus, _term: Term) -> Callable[[], Awaitable[None]]:
        bus.gave_up.set()  # (the second master came)

        async def stop() -> None:
            pass

        return stop

    with pytest.raises(LeadershipError, match=r"without ZooKeeper .* this one stops"):
        await within(lead(LoneCandidate(None), make_bus, serve), 10)  # type: ignore[arg-type]
    assert len(buses) == 1  # no second campaign, no taking the client id back
