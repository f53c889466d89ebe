"""Slaves that go out of touch and come back, and slaves an operator marks gone (Mesos
1.x's markUnreachable, _reregisterSlave and markGone, as the master sees them).

A slave past its timeout is removed as unreachable (`master.removals`): partition-
aware frameworks hear TASK_UNREACHABLE and keep the task, others hear TASK_LOST. If the
slave comes back, a partition-aware framework's task carries on and it hears TASK_RUNNING
(reason: slave re-registered); another framework's task is killed there (it was told the
task is lost, and may have launched it again). An operator who knows a slave is dead for
good marks it gone: its tasks end TASK_GONE_BY_OPERATOR, and it may not come back.
"""

from __future__ import annotations

from typing import Any

from master.allocation.allocator import Allocator
from master.authz import Caller
from master.books import Books, Framework, Slave, Task
from master.outbox import Outbox
from master.removals import Removals
from master.updates import TaskUpdates
from protocol.wire.messages import (
    Error,
    KillTask,
    MarkSlaveGone,
    Reason,
    RunningTask,
    ShutdownFramework,
    Source,
    TaskState,
    TaskStatus,
    Update,
    new_id,
)
from protocol.wire.slave import SLAVE_GONE


class Partitions:
    """Slaves out of touch and back, and marked gone."""

    def __init__(
        self,
        books: Books,
        allocator: Allocator,
        outbox: Outbox,
        updates: TaskUpdates,
        removals: Removals,
        log: Any,
    ) -> None:
        self.books, self.allocator, self.outbox = books, allocator, outbox
        self.updates, self.removals, self.log = updates, removals, log

    def task_back(self, fw: Framework, slave: Slave, running: RunningTask) -> None:
        """A partition-aware framework's unreachable task is reported by its slave again."""
        fw.unreachable.pop(running.task.task_id)
        task = Task(running.task, fw.framework_id, slave.slave_id, running.state)
        fw.tasks[task.task_id] = task
        slave.add_task(fw.framework_id, task.info)
        role = fw.role_of(task.info)
        self.allocator.allocate_existing(fw.framework_id, slave.slave_id, task.resources, role)
        status = TaskStatus(
            task_id=task.task_id,
            state=running.state,
            slave_id=slave.slave_id,
            reason=Reason.SLAVE_REREGISTERED,
            source=Source.MASTER,
            message="Unreachable slave re-registered",
        )
        task.status = status
        self.outbox.task_changed(task)
        self.log.info(
            "task.reachable",
            framework_id=fw.framework_id,
            task_id=task.task_id,
            slave_id=slave.slave_id,
            state=running.state.value,
        )
        self.updates.forward(fw, Update(status=status), slave.slave_id)
        if task.task_id in fw.kills_owed:  # asked while it was out of reach
            fw.kills_owed.discard(task.task_id)
            self.outbox.send_slave(
                slave.slave_id, KillTask(framework_id=fw.framework_id, task_id=task.task_id)
            )

    def unreachable_not_back(self, slave_id: str, back: set[tuple[str, str]]) -> None:
        """A slave returned without some of its unreachable tasks (running or ending): they
        are gone (as a slave answers reconciliation of a task it does not have)."""
        for fw in self.books.frameworks.values():
            for task in [t for t in fw.unreachable.values() if t.slave_id == slave_id]:
                if (fw.framework_id, task.task_id) in back:
                    continue
                fw.kills_owed.discard(task.task_id)
                fw.unreachable.pop(task.task_id)
                status = TaskStatus(
                    task_id=task.task_id,
                    state=TaskState.GONE,
                    slave_id=slave_id,
                    reason=Reason.RECONCILIATION,
                    source=Source.MASTER,
                    message=f"slave {slave_id} came back without it",
                    uuid=new_id(),  # (re-sent until acknowledged)
                )
                fw.complete(task, status)
                self.outbox.task_changed(task)
                self.updates.forward(fw, Update(status=status), slave_id)

    def refuse_gone_slave(self, slave_id: str, running: list[RunningTask], caller: Caller) -> None:
        """A slave marked gone tries to come back: refused, what it runs is killed, and
        the slave itself is told, on its own topic, so that it shuts down (a Mesos agent
        is sent ShutdownMessage) rather than ask again for ever."""
        said = f"slave {slave_id} was marked gone by an operator: it may not re-register"
        self.outbox.refuse(caller, said, SLAVE_GONE, "Register", slave_id=slave_id)
        self.outbox.send_slave(slave_id, Error(message=said, code=SLAVE_GONE, about="Register"))
        for framework_id in {r.framework_id for r in running}:
            self.outbox.send_slave(slave_id, ShutdownFramework(framework_id=framework_id))

    async def on_mark_slave_gone(self, msg: MarkSlaveGone, caller: Caller) -> None:
        slave_id = msg.slave_id
        slave = self.books.slaves.get(slave_id)
        why = f"marked gone by operator {caller.principal}"
        if slave is not None:
            self.removals.remove_slave(slave, why, gone=True)
        elif slave_id in self.books.removed_slaves or slave_id in self.books.recovering:
            self.books.recovering.pop(slave_id, None)
            self._gone_unreachable_tasks(slave_id, why)
            self.removals.slave_removed(slave_id, why, gone=True)
        elif slave_id not in self.books.gone_slaves:
            self.outbox.refuse(
                caller, f"unknown slave {slave_id}", "unknown-slave", "MarkSlaveGone"
            )
            return
        self.log.info("slave.marked_gone", slave_id=slave_id, by=caller.principal)
        self.outbox.emit("slave-gone", slave_id=slave_id, detail=why)

    def _gone_unreachable_tasks(self, slave_id: str, why: str) -> None:
        """An unreachable slave's tasks (partition-aware frameworks kept them) end."""
        for fw in self.books.frameworks.values():
            for task in [t for t in fw.unreachable.values() if t.slave_id == slave_id]:
                # back in the live set for a moment, so that it ends as every task does
                fw.tasks[task.task_id] = fw.unreachable.pop(task.task_id)
                self.updates.from_master(
                    fw,
                    task.task_id,
                    slave_id,
                    TaskState.GONE_BY_OPERATOR,
                    Reason.SLAVE_REMOVED_BY_OPERATOR,
                    f"slave {slave_id} {why}",
                )
