"""An HTTP question as a call: what a principal reads by the HTTP API that costs the
master work per request (why a framework is offered nothing: a pass over every slave; a
task's file: a ReadFile to its slave) waits its turn in the principal's queue and is
charged to its rate limit, as the bus's calls and the Mesos API's are
(`master.intake`). Past its capacity, it is refused (429), counted as the intake counts
refusals (a `rate-limited` reason of why says so). A task's file is read at most
FILE_READS_AT_ONCE at once by each principal, by every door together
(`master.calls.files`)."""

from __future__ import annotations

import asyncio

from master.intake.call_intake import INTAKE_WEIGHTS, queue_key, rate_limited
from master.intake.queues import PrincipalQueues


async def take_turn(queues: PrincipalQueues, kind: str, principal: str) -> str:
    """Wait for `principal`'s turn, its rate limit charged one call: "" then, or why it
    is refused (its queue is past its capacity)."""
    if not principal or not rate_limited(kind):
        return ""
    if queues.over_capacity(principal, 1):
        queues.refused(principal, 1)
        _, limit = queues.limit_of(principal)
        return (
            f"rate limit: {principal}'s queue is full ({limit.capacity} calls, handled at "
            f"{limit.qps:g} a second); ask again later"
        )
    key = queue_key(kind, principal)
    turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def go() -> None:
        if not turn.done():  # (the asker may have gone)
            turn.set_result(None)

    async def serve() -> None:
        await queues.charge(key, principal, 1.0, go)

    queues.put(key, INTAKE_WEIGHTS.get(kind, 1.0), principal, 1, serve)
    await turn
    return ""
