"""The executor driver's health checks of its executor's tasks (protocol.health_checker),
as Mesos's default executor runs them and as the slave runs a command task's: a task
with a `health_check` is checked from its first TASK_RUNNING until it ends or a kill of
it begins.

- Its verdict reaches the framework as a TASK_RUNNING update with `healthy` and
  REASON_TASK_HEALTH_CHECK_STATUS_UPDATED when it changes; the slave carries the last
  one on the task's later updates.
- After `consecutive_failures` failures in a row the task is killed as its slave would
  kill it: TASK_KILLING first if its framework asked to hear it, then the executor's own
  `kill_task`, with the task's kill grace (`ExecutorDriver.kill_grace`); the TASK_KILLED
  the executor then sends says `healthy` false, and why, unless it says why itself.
- HTTP and TCP checks connect to 127.0.0.1:PORT from the executor (its tasks share its
  slave's network); a COMMAND check runs as `sh -c` in the task's sandbox, as the
  executor runs (its user, its container), with its environment and the check's.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.health_checker import HealthChecks, Probe, command_probe, probe_for
from protocol.wire.health import CommandCheck, HealthCheck
from protocol.wire.messages import Reason, TaskInfo, TaskState, TaskStatus


@dataclass
class _Checked:
    """A task with a health check, as the driver has seen it."""

    check: HealthCheck
    killing: bool  # its framework hears TASK_KILLING (RunTask.killing)
    state: TaskState = TaskState.STAGING  # the last its executor said
    started: bool = False  # its check runs, or ran
    killed_for: str | None = None  # why its check killed it


class ExecutorHealth:
    """The health checks of one executor's tasks. `send`: a status update to the slave
    (the driver's `send_status_update`); `kill`: starts the executor's kill of a task,
    with its grace; `sandbox`: a task's sandbox."""

    def __init__(
        self,
        framework_id: str,
        log: Any,
        *,
        send: Callable[[TaskStatus], Awaitable[None]],
        kill: Callable[[str], object],
        sandbox: Callable[[str], Path],
    ) -> None:
        self.framework_id = framework_id
        self._send, self._kill, self._sandbox = send, kill, sandbox
        self._tasks: dict[str, _Checked] = {}
        self._checks = HealthChecks(log)

    def launched(self, task: TaskInfo, killing: bool) -> None:
        """A task arrived: checked once its executor says it runs, if it has a check."""
        if task.health_check is not None:
            self._tasks[task.task_id] = _Checked(task.health_check, killing)

    def kill_begins(self, task_id: str) -> None:
        """No health updates once a kill begins (its own, or its framework's)."""
        self._checks.stop((self.framework_id, task_id))

    def seen(self, status: TaskStatus) -> TaskStatus:
        """An update the executor sends (or a check does): its task's check starts at its
        first TASK_RUNNING and stops as it ends; the TASK_KILLED of a task its check
        killed says so."""
        task = self._tasks.get(status.task_id)
        if task is None:
            return status
        key = (self.framework_id, status.task_id)
        task.state = status.state
        if status.state.terminal:
            self._checks.stop(key)
            del self._tasks[status.task_id]
            if task.killed_for is not None:
                why = status.message or f"killed: {task.killed_for}"
                return status.model_copy(update={"healthy": False, "message": why})
        elif status.state == TaskState.KILLING:
            self._checks.stop(key)
        elif status.state == TaskState.RUNNING and not task.started:
            task.started = True
            probe = probe_for(task.check, self._command_probe(status.task_id))
            self._checks.start(
                key, task.check, probe, self._said(status.task_id), self._failed(status.task_id)
            )
        return status

    def _said(self, task_id: str) -> Callable[[bool, str], Awaitable[None]]:
        async def said(healthy: bool, why: str) -> None:
            task = self._tasks.get(task_id)
            if task is not None and task.state == TaskState.RUNNING:
                await self._send(
                    TaskStatus(
                        task_id=task_id,
                        state=TaskState.RUNNING,
                        reason=Reason.TASK_HEALTH_CHECK_STATUS_UPDATED,
                        message=why,
                        healthy=healthy,
                    )
                )

        return said

    def _failed(self, task_id: str) -> Callable[[str], Awaitable[None]]:
        async def failed(why: str) -> None:
            self.kill_begins(task_id)
            task = self._tasks.get(task_id)
            if task is None:
                return
            task.killed_for = why
            if task.killing:  # (its framework asked to hear it)
                status = TaskStatus(
                    task_id=task_id, state=TaskState.KILLING, message=f"killing: {why}"
                )
                await self._send(status)
            self._kill(task_id)  # (in a task of the driver's: this check's ends here)

        return failed

    def _command_probe(self, task_id: str) -> Callable[[CommandCheck, float], Probe]:
        def command(check: CommandCheck, timeout: float) -> Probe:
            async def probe() -> str | None:
                return await command_probe(
                    ["/bin/sh", "-c", check.value],
                    cwd=self._sandbox(task_id),
                    env={**os.environ, **check.environment},
                    timeout=timeout,
                )

            return probe

        return command

    async def close(self) -> None:
        await self._checks.close()
        self._tasks.clear()
