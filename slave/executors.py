"""Custom executors: a framework's executor program, started once per framework per slave.

The slave starts the executor's command with the bus coordinates in its environment; the
executor (see `frameworks.ExecutorDriver`) connects, sends `RegisterExecutor` to its
slave, and from then on receives its tasks on its own topic and sends status updates back
to the slave, which keeps them until the master acknowledges them. Messages for an
executor that has not registered yet wait in a queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

from protocol.bus import Bus
from protocol.messages import ExecutorInfo, ShutdownExecutor, Wire
from slave.sandbox import spawn_in_sandbox

ExitCallback = Callable[["ExecutorProcess", int], Awaitable[None]]


class ExecutorProcess:
    def __init__(
        self,
        framework_id: str,
        info: ExecutorInfo,
        topic: str,
        sandbox: Path,
        env: dict[str, str],
        on_exit: ExitCallback,
    ) -> None:
        self.framework_id = framework_id
        self.info = info
        self.topic = topic
        self.sandbox = sandbox
        self.env = env
        self.on_exit = on_exit
        self.tasks: set[str] = set()
        self.registered = False
        self.shutting_down = False
        self._queue: list[Wire] = []
        self._proc: asyncio.subprocess.Process | None = None
        self._watcher: asyncio.Task[None] | None = None

    @property
    def executor_id(self) -> str:
        return self.info.executor_id

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    async def start(self) -> None:
        self._proc = await spawn_in_sandbox(
            ["/bin/sh", "-c", "exec " + self.info.command.value],
            self.sandbox,
            {**self.env, **self.info.command.environment},
        )
        self._watcher = asyncio.create_task(self._watch())

    async def _watch(self) -> None:
        assert self._proc is not None
        code = await self._proc.wait()
        # whatever it started dies with it: no orphans outlive an executor
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        await self.on_exit(self, code)

    def send(self, bus: Bus, message: Wire) -> None:
        if self.registered:
            bus.post(self.topic, message)
        else:
            self._queue.append(message)

    def mark_registered(self, bus: Bus) -> None:
        self.registered = True
        queued, self._queue = self._queue, []
        for message in queued:
            bus.post(self.topic, message)

    async def shutdown(self, bus: Bus, grace: float) -> None:
        """Ask it to stop, then SIGTERM and SIGKILL its process group if it does not."""
        self.shutting_down = True
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        if self.registered:
            bus.post(
                self.topic,
                ShutdownExecutor(framework_id=self.framework_id, executor_id=self.executor_id),
            )
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, sig)
            try:
                await asyncio.wait_for(asyncio.shield(proc.wait()), grace)
                return
            except TimeoutError:
                continue

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
