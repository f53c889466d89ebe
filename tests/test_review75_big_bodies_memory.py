"""Review 75: a tenant's big Mesos calls wait for their turn without bound, each holding
its body and, once parsed, its whole JSON tree: a tenant fills the master's memory.

`BigBodies` reads a body over 64 KiB "one of each principal's at a time (its others
wait for it)". Nothing bounds how many wait. `SchedulerApi.handle` reads the whole body
(up to 1 MiB), waits for its principal's turn to parse it, and `_call` waits for a
second turn to turn the parsed call into a message, holding meanwhile the body and the
parsed JSON: some 8 bytes of Python objects for each byte of an ACCEPT of 1,000 tasks of
50 ports. The turns are a FIFO lock, so every call of the principal's in flight is
parsed first, then each waits for its second turn: with N calls posted at once, N trees
of some 8 MB each are held together (24 calls: 221 MiB at their peak, here). No request
of the principal's is refused for being one too many (STREAMS_PER_PRINCIPAL bounds
SUBSCRIBEs only).

The bus's door refuses a principal's payload unread past its queue's capacity
(`master.intake`: "into its principal's queue, or refused unread"), and a principal's
scheduler streams hold 32 MiB at most (STREAM_BYTES): over HTTP, a tenant's 100
connections posting ACCEPTs within every cap hold some 0.9 GB of the master, and a few
hundred end it (out of memory) for every tenant. Before 18ddffb each call was read on
the loop, one at a time, and dropped at once: its cost was the loop's time, not memory.

What a tenant relies on: another tenant's calls in flight hold a bounded part of the
master's memory (past it they are refused, as the bus refuses them), not one tree each.
"""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_review75_big_bodies_turns import costly_accept

from harness.mesos import Live, framework_info, live_cluster

IN_FLIGHT = 24  # team-b's ACCEPTs posted at once (each under 1 MiB, within every cap)
# what they may hold together: the bodies themselves, sent and received (some 2 x 24 MiB,
# the test's client among them), and a few parsed at once; not one parsed tree each
BUDGET = 96 * 1024 * 1024


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[Live]:
    async with live_cluster(tmp_path) as cluster:
        yield cluster


async def test_a_tenants_big_calls_in_flight_hold_a_bounded_part_of_the_master(
    live: Live,
) -> None:
    b = live.scheduler("team-b")
    try:
        assert await b.subscribe(framework_info("team-b")) == 200
        body = costly_accept(b.framework_id)
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            answers = await asyncio.gather(*(b.post(None, raw=body) for _ in range(IN_FLIGHT)))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        # each refused, as one (an operation not served) or as one too many
        assert all(status in (400, 429, 503) for status, _ in answers), answers
        held = peak - before
        assert held < BUDGET, (
            f"{IN_FLIGHT} ACCEPTs of {len(body):,} bytes posted at once by one tenant held "
            f"{held / 2**20:.0f} MiB of the master at their peak (budget "
            f"{BUDGET / 2**20:.0f} MiB): each waits for its turn holding its parsed JSON"
        )
    finally:
        await b.close()
