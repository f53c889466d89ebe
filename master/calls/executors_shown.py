"""What a re-registering slave's lists show of its custom executors: which run tasks,
which run none (idle), and an orphan holding its executor's resources -- read by the
slave's reconciliation (`master.calls.slave_calls`)."""

from __future__ import annotations

from dataclasses import replace

from master.orphans import Orphan
from protocol.wire.messages import TaskInfo
from protocol.wire.resources import Resources
from protocol.wire.slave import RunningExecutor, RunningTask


def executors_of(running: list[RunningTask]) -> dict[tuple[str, str], Resources]:
    """The custom executors running tasks show, each once: (framework, executor) ->
    its own resources."""
    found: dict[tuple[str, str], Resources] = {}
    for r in running:
        if r.task.executor is not None:
            found.setdefault(
                (r.framework_id, r.task.executor.executor_id), r.task.executor.resources
            )
    return found


def idle_executors(
    running: list[RunningTask], executors: list[RunningExecutor]
) -> list[RunningExecutor]:
    """The executors a slave names that none of its running tasks shows, each once."""
    shown = set(executors_of(running))
    idle: dict[tuple[str, str], RunningExecutor] = {}
    for e in executors:
        key = (e.framework_id, e.executor.executor_id)
        if key not in shown:
            idle.setdefault(key, e)
    return list(idle.values())


def executor_key(task: TaskInfo, slave_id: str) -> tuple[str, str] | None:
    """(slave, executor id) of a task's custom executor, or None for a command task."""
    return (slave_id, task.executor.executor_id) if task.executor is not None else None


def holding_executor(orphan: Orphan) -> Orphan:
    """The orphan, holding its executor's resources too (one orphan of each executor)."""
    executor = orphan.task.executor
    assert executor is not None
    return replace(orphan, held=orphan.held + executor.resources, holds_executor=True)
