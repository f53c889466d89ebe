"""review86: an Accept that fails half way gives back all it took, not only what it booked.

`_carry_out` takes a task's room out of the offers (a group's whole room, its executor's
and every task's, on a trial room made the Accept's), then books the task (and a new
executor) one at a time. `_accept_failed` gave back what `AcceptProgress` had: the room
left, the tasks booked (ended TASK_ERROR) and the executors booked with them. A failure
between the two -- a group's second task failing to be booked after its first was -- left
the second task's room taken and never given back (the framework's in the allocator for
good, offered to nobody); a failure before a group's first task was booked left its new
executor in the framework's books, held until the framework goes, for an executor no
slave ever runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from frameworks import (
    CommandInfo,
    ExecutorInfo,
    Resources,
    TaskState,
    build_task,
)
from master.calls.accepts import Accepts
from master.master import MasterConfig

from harness.groups import EXECUTOR, KEEP_OUT, TASK
from harness.helpers import (
    InProcess,
    Recorder,
    books_balance,
    eventually,
    framework,
    held,
    in_process_cluster,
)

CLUSTER = "undo"
pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[InProcess]:
    config = MasterConfig(allocation_interval=0.1)
    async with in_process_cluster(CLUSTER, tmp_path, config, slaves=1) as c:
        yield c


def failing_launch(monkeypatch: pytest.MonkeyPatch, task_id: str) -> None:
    """Booking `task_id` raises (standing in for a bug of ours), after its room is taken."""
    launch = Accepts._launch

    def _launch(self: Accepts, fw: Any, info: Any, slave_id: str, now: float) -> None:
        if info.task_id == task_id:
            raise RuntimeError("a task that cannot be booked, its room taken already")
        launch(self, fw, info, slave_id, now)

    monkeypatch.setattr(Accepts, "_launch", _launch)


@pytest.mark.parametrize("failing", ["first", "second"])
async def test_a_group_whose_booking_fails_half_way_gives_back_all_it_took(
    cluster: InProcess, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    failing_launch(monkeypatch, failing)
    rec = Recorder()
    async with framework(cluster, rec) as driver:
        offer = await rec.offer_on(driver)
        sid, fid = offer.slave_id, driver.framework_id or ""
        tasks = [
            build_task(offer, name, TASK, command="sleep 300", task_id=name)
            for name in ("first", "second")
        ]
        await driver.launch_group([offer.offer_id], "pod", tasks, EXECUTOR, KEEP_OUT)
        for task_id in ("first", "second"):
            await rec.update(task_id, TaskState.ERROR)
        fw = cluster.master.books.frameworks[fid]
        assert not fw.tasks
        assert not fw.executors  # (no slave runs it: nothing keeps it)
        # nothing of the offer is held: not the task never booked, nor the executor
        await eventually(lambda: held(cluster, fid, sid) == Resources())
        books_balance(cluster.master)


async def test_a_task_whose_booking_fails_gives_back_its_room_and_its_executors(
    cluster: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for a task of its own with a custom executor it starts."""
    failing_launch(monkeypatch, "solo")
    rec = Recorder()
    async with framework(cluster, rec) as driver:
        offer = await rec.offer_on(driver)
        sid, fid = offer.slave_id, driver.framework_id or ""
        own = ExecutorInfo(executor_id="own", command=CommandInfo(value="true"), resources=EXECUTOR)
        solo = build_task(offer, "solo", TASK, executor=own, task_id="solo")
        await driver.launch_tasks([offer.offer_id], [solo], KEEP_OUT)
        await rec.update("solo", TaskState.ERROR)
        fw = cluster.master.books.frameworks[fid]
        assert not fw.tasks
        assert not fw.executors
        await eventually(lambda: held(cluster, fid, sid) == Resources())
        books_balance(cluster.master)
