"""What a launch takes from the offers it uses, counted one way for the master, which
launches or refuses each task, and for the SDK's pre-check, which refuses a launch the
master would refuse before it is sent (`frameworks.calls.launch_checked`).

As in Mesos, a task takes its own resources, and its custom executor's too if that
executor is not running on the slave yet: the executor holds them until it exits. A task
that names a running executor with other resources than it runs with is refused.
"""

from __future__ import annotations

from collections.abc import Mapping

from protocol.wire.resources import Resources
from protocol.wire.values import ExecutorInfo, TaskInfo


class OfferRoom:
    """What is left of the offers of one launch on `slave_id`, task by task. `running`:
    the framework's executors on that slave, with their resources where known (None: the
    SDK knows only that it runs, from its offer's `executor_ids`)."""

    def __init__(
        self, slave_id: str, left: Resources, running: Mapping[str, Resources | None]
    ) -> None:
        self.slave_id, self.left = slave_id, left
        self.running = dict(running)

    def problem(self, task: TaskInfo) -> str | None:
        """Why `task` cannot take its room from what is left, or None."""
        tid = task.task_id
        if task.slave_id != self.slave_id:
            return f"task {tid}: slave_id {task.slave_id} is not the offer's slave {self.slave_id}"
        if not task.resources:
            return f"task {tid}: asks for no resources"
        need = task.resources
        if task.executor is not None:
            eid = task.executor.executor_id
            if eid not in self.running:
                need = need + task.executor.resources
            elif (held := self.running[eid]) is not None and held != task.executor.resources:
                return f"task {tid}: executor {eid} runs with {held}, not {task.executor.resources}"
        if not self.left.contains(need):  # (which resource of which slave, and by how much)
            short = need.subtract_clamped(self.left)
            return (
                f"task {tid}: needs {need} but only {self.left} is left of the offer on slave "
                f"{self.slave_id}: short of {short}"
            )
        return None

    def take(self, task: TaskInfo) -> ExecutorInfo | None:
        """Take `task`'s room (its `problem` None); the executor it starts, if any."""
        self.left = self.left - task.resources
        executor = task.executor
        if executor is None or executor.executor_id in self.running:
            return None
        self.left = self.left - executor.resources
        self.running[executor.executor_id] = executor.resources
        return executor
