"""An HTTP question as a call (`master.http.turns`): charged to its principal's rate
limit, refused past its capacity and counted so; a principal's task-file reads bounded
at once, and forgotten when none runs."""

from __future__ import annotations

import asyncio

from master.http.turns import FileReads, take_turn
from master.intake.queues import PrincipalQueues
from master.rate_limits import RateLimits
from protocol.transport.aio import within


async def test_questions_past_the_capacity_are_refused_and_counted() -> None:
    queues = PrincipalQueues(RateLimits.defaults(1.0, 2))
    try:
        asked = [take_turn(queues, "framework", "alice") for _ in range(10)]
        said = await within(asyncio.gather(*asked), 10)
        refused = [s for s in said if s]
        # a burst of 10 at 1 a second, a queue of 2: a few answered in turn, most refused
        assert len(said) - len(refused) <= 4, said
        assert all("alice's queue is full (2 calls, handled at 1 a second)" in s for s in refused)
        assert queues.counts["alice"].refused == len(refused)
        # another principal's questions are its own limit's
        assert await take_turn(queues, "framework", "bob") == ""
        # a slave is never limited; an unauthenticated asker (no principal) neither
        assert await take_turn(queues, "slave", "s1") == ""
        assert await take_turn(queues, "operator", "") == ""
    finally:
        await queues.close()


def test_task_file_reads_at_once_are_bounded_per_principal() -> None:
    reads = FileReads(at_once=2)
    assert reads.start("alice") == reads.start("alice") == ""
    assert "at most 2 task-file reads at once" in reads.start("alice")
    assert reads.start("bob") == ""
    reads.done("alice")
    assert reads.start("alice") == ""
    for p in ("alice", "alice", "bob"):
        reads.done(p)
    assert not reads.reading  # (the idle forgotten)
