"""Kills in flight: each waits out its task's grace in an asyncio task of its own, so that
the slave's inbox is not held while a task finishes its work (a kill policy may give it a
minute), and a teardown's kills run side by side rather than one grace after another."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from protocol.transport.aio import cancel_and_wait

if TYPE_CHECKING:
    from slave.config import TaskRecord
    from slave.runners import Limit


class Kills:
    def __init__(self, log: Any) -> None:
        self.log = log
        self._running: set[asyncio.Task[None]] = set()

    def start(
        self, record: TaskRecord, grace: float, limit: Limit | None = None
    ) -> asyncio.Task[None] | None:
        """Kill a task its runner runs (SIGTERM, `grace`, SIGKILL; `limit`: why, if not
        its framework's kill) beside the slave's other work; the kill, to wait for."""
        if record.runner is None:
            return None  # (a custom executor's task: its executor kills it)
        ids = {"framework_id": record.framework_id, "task_id": record.info.task_id}
        task = asyncio.create_task(record.runner.kill(grace, limit), name=f"kill-{ids}")
        self._running.add(task)
        task.add_done_callback(lambda done: self._ended(done, ids))
        return task

    def then(self, kills: list[asyncio.Task[None]], tell: Callable[[], None]) -> None:
        """Once `kills` have all ended, `tell` (stopped with the other kills)."""

        async def after() -> None:
            if kills:
                await asyncio.wait(kills)
            tell()

        task = asyncio.create_task(after(), name="kills-then")
        self._running.add(task)
        task.add_done_callback(lambda done: self._ended(done, {}))

    def overdue(
        self, record: TaskRecord, after: float, shutdown: Callable[[], Awaitable[None]]
    ) -> None:
        """The master killed a custom executor's task: if it has not ended `after` seconds
        from now (its executor ignored the kill), the executor is shut down, its tasks
        with it. A tenant keeps nothing on a draining slave, nor a preempted task's room,
        by not answering."""
        ids = {"framework_id": record.framework_id, "task_id": record.info.task_id}

        async def watch() -> None:
            await asyncio.sleep(after)
            if not record.state.terminal:
                self.log.warning("kill.ignored", executor_key=record.executor_key, **ids)
                await shutdown()

        task = asyncio.create_task(watch(), name=f"kill-overdue-{ids}")
        self._running.add(task)
        task.add_done_callback(lambda done: self._ended(done, ids))

    def _ended(self, task: asyncio.Task[None], ids: dict[str, str]) -> None:
        self._running.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            self.log.error("kill.failed", error=repr(error), **ids)

    async def finish(self) -> None:
        """Wait for the kills in flight: each ends within its grace."""
        if self._running:
            await asyncio.wait(set(self._running))

    async def cancel(self) -> None:
        """Stop waiting (the slave stops and leaves its tasks to a successor)."""
        for task in list(self._running):
            await cancel_and_wait(task)
