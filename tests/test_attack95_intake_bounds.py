"""Attack 95: a tenant's big calls held a gigabyte of the master's memory.

A principal's calls waiting for its rate limit counted once each against its capacity
(1,000), whatever they held: mallory's Reconciles of 4,096 made-up task ids each (549 KB
bodies, within every bound) over the Mesos HTTP API, four threads for 25 s, were held
parsed by the hundred, and the master went from 67 MB to 1.48 GB, its backlog draining
for minutes. Now a call held for its bucket counts its cost against the capacity (such a
Reconcile: 410), so two are held and the rest refused; and the payloads waiting to be
read count their bytes against MOST_WAITING_BYTES (a thousand payloads near the
broker's packet limit were a gigabyte too).

In process: the master's queues (`master.intake.queues`), as its intake drives them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from master.intake.costs import reconcile_cost
from master.intake.queues import MOST_WAITING_BYTES, PrincipalQueues
from master.rate_limits import RateLimits

from harness.helpers import eventually


async def test_calls_held_for_the_bucket_count_their_cost_against_the_capacity() -> None:
    """As the Mesos HTTP API's calls go in (`CallIntake.call`): admitted by their cost,
    queued, read in their turn and charged, held while the bucket is in debt."""
    queues = PrincipalQueues(RateLimits.defaults(10.0, 1_000))
    handled: list[int] = []
    cost = reconcile_cost(4_096)  # (410)
    key = "framework/mallory"
    admitted = 0
    for i in range(100):
        if queues.over_capacity("mallory", cost):
            continue
        admitted += 1

        async def handle(i: int = i) -> None:
            handled.append(i)

        async def serve(handle: Callable[[], Awaitable[None]] = handle) -> None:
            await queues.charge(key, "mallory", cost, handle)

        queues.put(key, 1.0, "mallory", 1, serve)
        await eventually(lambda: queues.backlog() == 0)  # (read, and charged or held)
    # the first paid from the bucket (into debt), two more held: 2 x 410 + 410 > 1,000
    assert admitted == 3
    assert handled == [0]
    assert queues.waiting("mallory") == 2 * cost
    await queues.close()
    assert queues.waiting("mallory") == 0


async def test_payloads_waiting_to_be_read_are_bounded_in_bytes() -> None:
    queues = PrincipalQueues(RateLimits.defaults(1e9, 1_000_000))
    size = 900 * 1024  # (a payload near a broker's 1 MiB packets)
    release = asyncio.Event()

    async def slow() -> None:
        await release.wait()

    queues.put("framework/other", 1.0, "other", 1, slow, 1)  # (something is being served)
    admitted = 0
    for _ in range(1_000):
        if queues.over_capacity("mallory", 1, size):
            break
        queues.put("framework/mallory", 1.0, "mallory", 1, slow, size)
        admitted += 1
    assert admitted == MOST_WAITING_BYTES // size
    assert not queues.over_capacity("alice", 1, size)  # (another tenant's bytes: her own)
    release.set()
    await queues.close()
