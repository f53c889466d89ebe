"""How far an Accept got once its offers were taken, so that a handler that fails half way
(a bug of ours: a framework's call is checked before it is carried out) gives everything
back instead of keeping it from everybody: its tasks booked but not sent to the slave
end TASK_ERROR (their resources freed, as any task's end frees them), the executors it
started with them go, the tasks it never reached are answered TASK_ERROR, and what its
offers left is declined. What was sent to the slave runs on: the slave has it.

What is told here is what was *taken* out of the offers (a task's room, a new executor's),
as soon as it is: whether it reached the books too is the books' to say (`give_back`),
so that a failure between the two -- a room taken, its task or executor not booked --
gives that room back with the offers' rest rather than keep it for good (review86).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol.wire.launches import OfferRoom
from protocol.wire.messages import TaskInfo
from protocol.wire.reservations import is_shared
from protocol.wire.resources import Resources

ExecutorKey = tuple[str, str]  # (slave, executor)


@dataclass
class AcceptProgress:
    room: OfferRoom  # what its offers hold still (a group's trial room, once it is taken)
    told: set[str] = field(default_factory=set)  # its tasks answered: refused, or sent
    taken: dict[str, TaskInfo] = field(default_factory=dict)  # room taken, not sent yet
    executors: dict[str, set[ExecutorKey]] = field(default_factory=dict)  # (taken's, by task)
    executor_room: dict[ExecutorKey, Resources] = field(default_factory=dict)  # (theirs)
    declined: bool = False  # what its offers left is given back

    def took(
        self,
        tasks: list[TaskInfo],
        executor: ExecutorKey | None = None,
        room: Resources | None = None,
    ) -> None:
        """`tasks`' room is out of the offers (and `executor`'s, `room`, which starts with
        them: a task's own executor, or a group's), before they are booked."""
        for task in tasks:
            self.taken[task.task_id] = task
            if executor is not None:
                self.executors.setdefault(task.task_id, set()).add(executor)
        if executor is not None:
            self.executor_room.setdefault(executor, room or Resources())

    def refused(self, task_id: str) -> None:
        self.told.add(task_id)

    def sent(self, tasks: list[TaskInfo]) -> None:
        """These are on their way to the slave: theirs to run, and to report."""
        for task in tasks:
            self.taken.pop(task.task_id, None)
            self.executors.pop(task.task_id, None)
            self.told.add(task.task_id)

    def unsent_executors(self) -> dict[ExecutorKey, Resources]:
        """The executors started with tasks not sent, and the room each took."""
        keys = {key for keys in self.executors.values() for key in keys}
        return {key: self.executor_room[key] for key in keys}

    def give_back(self, booked: set[str], held: set[str]) -> Resources:
        """What the tasks taken but not `booked` took of the offers: theirs to decline
        (`booked` tasks' ends free theirs). A shared volume goes once, and not while a
        task of the Accept that stays or ends through the books (`held`: its volumes)
        has it: its copy is that task's."""
        back: dict[str, int] = {}
        for task_id, task in self.taken.items():
            if task_id in booked:
                continue
            for key, millis in task.resources.millis.items():
                if not is_shared(key):
                    back[key] = back.get(key, 0) + millis
                elif key not in held and not self.room.left.get_millis(key):
                    back[key] = millis  # (in `left` still: it goes with the offers' rest)
        return Resources.from_millis(back)
