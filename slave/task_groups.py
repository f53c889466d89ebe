"""Task groups on the slave (Mesos's LAUNCH_GROUP), whose executor the slave plays as
Mesos's default executor: which command tasks of a framework were launched together, and
under which executor. The books only: the slave runs each task as any command task (its
own container, user, sandbox, health check, kill grace) and, as a task ends, asks here
which of its siblings to kill and whether its executor has ended.

As Mesos's default executor: a task of a group that ends FAILED or KILLED has the other
live tasks of its group killed (once: their own ends kill nothing more); one that
finishes does not. An executor with no task left ends, its own resources given back; a
later group may run on it until then.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from protocol.wire.messages import TaskState
from protocol.wire.resources import Resources

KILLS_SIBLINGS = frozenset({TaskState.FAILED, TaskState.KILLED})
"""A task of a group ending so has the rest of its group killed (Mesos's default kill
policy for a task group)."""


@dataclass
class Group:
    """The tasks one LAUNCH_GROUP launched, those still live."""

    executor: tuple[str, str]  # (framework, executor id)
    members: frozenset[str]  # all its tasks, as launched
    live: set[str]
    killed: str = ""  # why its tasks are killed, once a task's end began it (then no more)


@dataclass
class GroupExecutor:
    """A task group's executor: its own resources, and its groups' live tasks."""

    framework_id: str
    executor_id: str
    resources: Resources
    tasks: set[str] = field(default_factory=set)


@dataclass
class Ended:
    """What a group task's end leaves to do: its siblings to kill (by task id), and its
    executor, if that was its last task."""

    kill: list[str]
    executor: GroupExecutor | None


class TaskGroups:
    def __init__(self) -> None:
        self.executors: dict[tuple[str, str], GroupExecutor] = {}
        self._groups: dict[tuple[str, str], Group] = {}  # (framework, task) -> its group

    def runs(self, framework_id: str, executor_id: str) -> bool:
        return (framework_id, executor_id) in self.executors

    def used(self) -> Resources:
        """What the running group executors hold themselves (their tasks' aside)."""
        total = Resources()
        for executor in self.executors.values():
            total = total + executor.resources
        return total

    def start(
        self, framework_id: str, executor_id: str, resources: Resources, task_ids: list[str]
    ) -> None:
        """A group of `task_ids` runs under the executor (started now, if it does not run)."""
        key = (framework_id, executor_id)
        executor = self.executors.get(key)
        if executor is None:
            executor = self.executors[key] = GroupExecutor(framework_id, executor_id, resources)
        executor.tasks.update(task_ids)
        group = Group(key, frozenset(task_ids), set(task_ids))
        for task_id in task_ids:
            self._groups[(framework_id, task_id)] = group

    def executor_of(self, framework_id: str, task_id: str) -> str | None:
        """The id of the executor a group's task runs under (None: not a group's)."""
        group = self._groups.get((framework_id, task_id))
        return group.executor[1] if group is not None else None

    def checkpoint(self, framework_id: str, task_id: str) -> dict[str, Any] | None:
        """What a restart needs of a task's group (None: not a group's), kept with the
        task: its executor (id and resources) and its group's tasks."""
        group = self._groups.get((framework_id, task_id))
        if group is None:
            return None
        executor = self.executors[group.executor]
        return {
            "executor_id": executor.executor_id,
            "resources": dict(executor.resources.millis),
            "tasks": sorted(group.members),
        }

    def rejoin(self, framework_id: str, task_id: str, kept: Any) -> str:
        """A task a restarted slave recovers, back in its group and under its executor
        as `checkpoint` kept them: its executor's id. (Each task of a group rejoins the
        group its siblings rejoined; those that ended before are not live in it.)"""
        executor_id, members = str(kept["executor_id"]), frozenset(kept["tasks"])
        key = (framework_id, executor_id)
        executor = self.executors.get(key)
        if executor is None:
            resources = Resources.from_millis(kept["resources"])
            executor = self.executors[key] = GroupExecutor(framework_id, executor_id, resources)
        executor.tasks.add(task_id)
        group = next(
            (
                g
                for m in members
                if (g := self._groups.get((framework_id, m))) is not None and g.members == members
            ),
            None,
        )
        if group is None:
            group = Group(key, members, set())
        group.live.add(task_id)
        self._groups[(framework_id, task_id)] = group
        return executor_id

    def killed(self, framework_id: str, task_id: str) -> str:
        """Why the group of a task is being killed ("": it is not, or no group's)."""
        group = self._groups.get((framework_id, task_id))
        return group.killed if group is not None else ""

    def ended(self, framework_id: str, task_id: str, state: TaskState | None) -> Ended:
        """A task ended (`state`; None: forgotten, its end not told). Not one of a group:
        nothing to do."""
        group = self._groups.pop((framework_id, task_id), None)
        if group is None:
            return Ended([], None)
        group.live.discard(task_id)
        kill: list[str] = []
        if state in KILLS_SIBLINGS and not group.killed:
            group.killed = f"killed: task {task_id} of its group ended {state.value}"
            kill = sorted(group.live)
        done = None
        executor = self.executors.get(group.executor)
        if executor is not None:
            executor.tasks.discard(task_id)
            if not executor.tasks:
                done = self.executors.pop(group.executor)
        return Ended(kill, done)

    def forget_framework(self, framework_id: str) -> None:
        """Its tasks are killed and forgotten (its framework shut down): nothing of its
        groups is left to do."""
        for key in [k for k in self._groups if k[0] == framework_id]:
            del self._groups[key]
        for key in [k for k in self.executors if k[0] == framework_id]:
            del self.executors[key]
