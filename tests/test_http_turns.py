"""An HTTP question as a call (`master.http.turns`): charged to its principal's rate
limit, refused past its capacity and counted so; a principal's task-file reads bounded
at once, by every door together (`master.calls.files`), and forgotten when none runs."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from master.calls.files import FileReadsBusy, FileRequests
from master.http.turns import take_turn
from master.intake.queues import PrincipalQueues
from master.rate_limits import RateLimits
from protocol.transport.aio import within
from protocol.wire.messages import FileData, ReadFile

from harness.helpers import eventually


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


async def test_task_file_reads_at_once_are_bounded_per_principal() -> None:
    asked: list[ReadFile] = []
    task: Any = SimpleNamespace(slave_id="s1", info=SimpleNamespace(executor=None))
    fw = SimpleNamespace(tasks={"t": task}, ended={})
    books: Any = SimpleNamespace(
        frameworks={"f": fw}, completed_frameworks={}, slaves={"s1": 1}, slave_owners={"s1": "s1"}
    )
    outbox: Any = SimpleNamespace(send_slave=lambda slave_id, message: asked.append(message))
    files = FileRequests(books, outbox, at_once=2)

    def read(principal: str) -> asyncio.Task[FileData]:
        return asyncio.create_task(files.read_task_file(principal, "f", "t", "stdout", 0, 10))

    alices = [read("alice"), read("alice")]
    bobs = read("bob")
    await eventually(lambda: len(asked) == 3)  # (each has asked its slave)
    with pytest.raises(FileReadsBusy, match="at most 2 task-file reads at once"):
        await read("alice")
    assert len(asked) == 3  # (the third of alice's never reached the slave; bob's did)
    slave = SimpleNamespace(principal="s1", kind="slave", reply_to=None)
    for r in asked:
        data = FileData(request_id=r.request_id, slave_id="s1", data=b"x")
        await files.on_file_data(data, slave)  # type: ignore[arg-type]
    assert [(await t).data for t in [*alices, bobs]] == [b"x"] * 3
    assert not files.reading  # (the idle forgotten)
