"""What a re-registering slave's lists show of its executors: the custom executors that
run tasks, those no task shows (idle custom executors, and task groups' executors, whose
tasks name none), and an orphan holding its executor's resources -- read by the slave's
reconciliation (`master.calls.slave_calls`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from master.orphans import Orphan
from protocol.wire.messages import TaskInfo
from protocol.wire.resources import Resources
from protocol.wire.slave import RunningExecutor, RunningGroupExecutor, RunningTask


@dataclass(frozen=True, slots=True)
class Unshown:
    """An executor a slave names that none of its running tasks shows: an idle custom
    executor, or a task group's (`group`), whose tasks name no executor. Its room is
    used, booked as a custom executor's is at its first task's launch."""

    framework_id: str
    executor_id: str
    resources: Resources
    group: bool = False


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


def unshown_executors(
    running: list[RunningTask],
    executors: list[RunningExecutor],
    groups: list[RunningGroupExecutor],
) -> list[Unshown]:
    """The executors a slave names that none of its running tasks shows, each once (a
    custom executor's id named as a group's too is the custom one's)."""
    shown = set(executors_of(running))
    unshown: dict[tuple[str, str], Unshown] = {}
    for e in executors:
        key = (e.framework_id, e.executor.executor_id)
        if key not in shown:
            unshown.setdefault(key, Unshown(*key, e.executor.resources))
    for g in groups:
        key = (g.framework_id, g.executor_id)
        if key not in shown:
            unshown.setdefault(key, Unshown(*key, g.resources, group=True))
    return list(unshown.values())


def executor_key(task: TaskInfo, slave_id: str) -> tuple[str, str] | None:
    """(slave, executor id) of a task's custom executor, or None for a command task."""
    return (slave_id, task.executor.executor_id) if task.executor is not None else None


def holding_executor(orphan: Orphan) -> Orphan:
    """The orphan, holding its executor's resources too (one orphan of each executor)."""
    executor = orphan.task.executor
    assert executor is not None
    return replace(orphan, held=orphan.held + executor.resources, holds_executor=True)
