"""How far an Accept got once its offers were taken, so that a handler that fails half way
(a bug of ours: a framework's call is checked before it is carried out) gives everything
back instead of keeping it from everybody: its tasks booked but not sent to the slave
end TASK_ERROR (their resources freed, as any task's end frees them), the executors it
started with them go, the tasks it never reached are answered TASK_ERROR, and what its
offers left is declined. What was sent to the slave runs on: the slave has it."""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol.wire.launches import OfferRoom
from protocol.wire.messages import TaskInfo

ExecutorKey = tuple[str, str]  # (slave, executor)


@dataclass
class AcceptProgress:
    room: OfferRoom  # what its offers hold still (a group's trial room, once it is taken)
    told: set[str] = field(default_factory=set)  # its tasks answered: refused, or sent
    unsent: dict[str, TaskInfo] = field(default_factory=dict)  # booked, not sent yet
    executors: dict[str, set[ExecutorKey]] = field(default_factory=dict)  # (unsent's, by task)
    declined: bool = False  # what its offers left is given back

    def booked(self, task: TaskInfo, executor: ExecutorKey | None = None) -> None:
        """`task` is in the books as launched (and `executor`, started for it, too)."""
        self.unsent[task.task_id] = task
        if executor is not None:
            self.executors.setdefault(task.task_id, set()).add(executor)

    def refused(self, task_id: str) -> None:
        self.told.add(task_id)

    def sent(self, tasks: list[TaskInfo]) -> None:
        """These are on their way to the slave: theirs to run, and to report."""
        for task in tasks:
            self.unsent.pop(task.task_id, None)
            self.executors.pop(task.task_id, None)
            self.told.add(task.task_id)

    def unsent_executors(self) -> set[ExecutorKey]:
        return {key for keys in self.executors.values() for key in keys}
