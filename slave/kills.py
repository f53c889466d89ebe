"""Kills in flight: each waits out its task's grace in an asyncio task of its own, so that
the slave's inbox is not held while a task finishes its work (a kill policy may give it a
minute), and a teardown's kills run side by side rather than one grace after another."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from protocol.transport.aio import cancel_and_wait
from slave.config import KillBegun

if TYPE_CHECKING:
    from slave.config import TaskRecord
    from slave.runners import Limit


class Kills:
    def __init__(self, log: Any, checkpoint: Callable[[TaskRecord], None]) -> None:
        """`checkpoint`: a task's record written down (with the kill begun in it)."""
        self.log = log
        self._checkpoint = checkpoint
        self._running: set[asyncio.Task[None]] = set()
        # each framework's kills and executor shutdowns in flight (a teardown waits for
        # them all, those begun before it too: a task killed, then its framework torn down)
        self._of: dict[str, set[asyncio.Task[None]]] = {}
        # each framework's tasks in their kill grace, by their kill (a drain may cut it)
        self._killing: dict[str, dict[asyncio.Task[None], TaskRecord]] = {}

    def start(
        self,
        record: TaskRecord,
        grace: float,
        limit: Limit | None = None,
        *,
        signalled: bool = False,
    ) -> None:
        """Kill a task its runner runs (SIGTERM, `grace`, SIGKILL; `limit`: why, if not
        its framework's kill) beside the slave's other work; the kill is checkpointed
        with the task (`signalled`: one a restarted slave resumes, see Runner.kill)."""
        if record.runner is None:
            return  # (a custom executor's task: its executor kills it)
        hard = limit is not None and limit.hard
        self._record(record, time.time() + (0.0 if hard else grace), limit)
        ids = {"framework_id": record.framework_id, "task_id": record.info.task_id}
        killed = record.runner.kill(grace, limit, signalled=signalled)
        kill = self._track(record.framework_id, killed, f"kill-{ids}", ids)
        killing = self._killing.setdefault(record.framework_id, {})
        killing[kill] = record

        def ended(done: asyncio.Task[None]) -> None:
            killing.pop(done, None)
            if not killing and self._killing.get(record.framework_id) is killing:
                del self._killing[record.framework_id]

        kill.add_done_callback(ended)

    def cut(self, framework_id: str, grace: float) -> None:
        """The framework's tasks in their kill grace get at most `grace` from now (a
        drain's bound): each runner brings its SIGKILL forward, sending nothing again."""
        for record in list(self._killing.get(framework_id, {}).values()):
            if record.runner is not None:
                self._record(record, time.time() + grace, None)
                ids = {"framework_id": framework_id, "task_id": record.info.task_id}
                self._track(framework_id, record.runner.kill(grace), f"cut-{ids}", ids)

    def _record(self, record: TaskRecord, until: float, limit: Limit | None) -> None:
        """The task's kill, its SIGKILL due `until` (or sooner, as a second kill may bring
        it forward; the first says how it ends, as the runner keeps), checkpointed."""
        kill = record.kill
        if kill is None:
            record.kill = KillBegun.of(until, limit)
        elif until < kill.until:
            record.kill = dataclasses.replace(kill, until=until)
        else:
            return
        if not record.state.terminal:  # (an ended task's record is dropped: not made again)
            self._checkpoint(record)

    def shut_down(self, framework_id: str, shutdown: Awaitable[None], name: str) -> None:
        """An executor's shutdown (its grace, its kill) beside the slave's other work."""
        ids = {"framework_id": framework_id, "executor": name}
        self._track(framework_id, shutdown, f"shutdown-{ids}", ids)

    def of(self, framework_id: str) -> list[asyncio.Task[None]]:
        """The framework's kills and executor shutdowns still in flight."""
        return list(self._of.get(framework_id, ()))

    def _track(
        self, framework_id: str, work: Awaitable[None], name: str, ids: dict[str, str]
    ) -> asyncio.Task[None]:
        task = asyncio.ensure_future(work)
        task.set_name(name)
        self._running.add(task)
        self._of.setdefault(framework_id, set()).add(task)

        def ended(done: asyncio.Task[None]) -> None:
            mine = self._of.get(framework_id)
            if mine is not None:
                mine.discard(done)
                if not mine:
                    del self._of[framework_id]
            self._ended(done, ids)

        task.add_done_callback(ended)
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
