"""Who else hears of tasks ended, frameworks gone and slaves admitted or removed:
collaborators register here (preemption's counters, timers and claims, the offer cycle's
per-framework state) instead of overriding empty hooks of whoever ends them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from master.books import Framework, Slave, Task
from protocol.wire.messages import TaskStatus

TaskEnded = Callable[[Framework, Task, TaskStatus], None]
FrameworkGone = Callable[[str], None]
SlaveAdmitted = Callable[[Slave], None]
SlaveRemoved = Callable[[str], None]


@dataclass
class Listeners:
    task_ended: list[TaskEnded] = field(default_factory=list)
    framework_gone: list[FrameworkGone] = field(default_factory=list)
    slave_admitted: list[SlaveAdmitted] = field(default_factory=list)  # (re-)registered
    slave_removed: list[SlaveRemoved] = field(default_factory=list)

    def tell_task_ended(self, fw: Framework, task: Task, status: TaskStatus) -> None:
        for listener in self.task_ended:
            listener(fw, task, status)

    def tell_slave_admitted(self, slave: Slave) -> None:
        for listener in self.slave_admitted:
            listener(slave)

    def tell_slave_removed(self, slave_id: str) -> None:
        for listener in self.slave_removed:
            listener(slave_id)

    def tell_framework_gone(self, framework_id: str) -> None:
        for listener in self.framework_gone:
            listener(framework_id)
