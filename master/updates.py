"""Tasks' status updates on their way to frameworks, and tasks' ends.

A framework hears every update until it acknowledges it: one the master forwards (from a
slave, which keeps it until then too) or one the master decides itself (LOST, ERROR,
...), re-sent with a backoff while the framework is connected. A task that ends gives its
resources back to the pool, once: as soon as its slave's latest state says it ended,
though its terminal update may still wait behind ones its framework has not
acknowledged.
"""

from __future__ import annotations

from collections.abc import Callable

from master.allocation.allocator import Allocator
from master.books import Books, Framework, PendingUpdate, Task
from master.listeners import Listeners
from master.outbox import Outbox
from master.task_states import as_seen
from protocol.transport.aio import loop_time
from protocol.wire.messages import (
    Reason,
    Source,
    StatusAck,
    TaskState,
    TaskStatus,
    Update,
    new_id,
)

MAX_RETRY_BACKOFF = 30.0


class TaskUpdates:
    def __init__(
        self,
        books: Books,
        allocator: Allocator,
        outbox: Outbox,
        listeners: Listeners,
        request_round: Callable[[], None],
        *,
        status_retry: float,
    ) -> None:
        """`status_retry`: seconds before an unacknowledged update is first sent again."""
        self.books, self.allocator, self.outbox = books, allocator, outbox
        self.listeners, self.request_round = listeners, request_round
        self.status_retry = status_retry
        self.resends = 0  # updates sent again, unacknowledged (the metrics read it)

    def forward(self, fw: Framework, update: Update, slave_id: str, relayed: bool = False) -> None:
        """To the framework, and owed to it until acknowledged (`relayed`: a slave's, which
        the slave keeps until then too)."""
        if update.status.uuid:
            fw.pending[update.status.uuid] = PendingUpdate(
                update,
                slave_id,
                loop_time() + self.status_retry,
                self.status_retry,
                relayed,
            )
        if fw.connected:
            self.outbox.send_framework(fw, update)

    def resend(self, fw: Framework, pending: PendingUpdate, now: float) -> None:
        """Send an owed update again; the next try waits twice as long (at most
        MAX_RETRY_BACKOFF)."""
        self.outbox.send_framework(fw, pending.update)
        self.resends += 1
        pending.backoff = min(pending.backoff * 2, MAX_RETRY_BACKOFF)
        pending.next_attempt = now + pending.backoff

    def resend_due(self, now: float) -> None:
        """Every connected framework's owed updates whose next try is due."""
        for fw in self.books.frameworks.values():
            if not fw.connected:
                continue
            for pending in fw.pending.values():
                if pending.next_attempt <= now:
                    self.resend(fw, pending, now)

    def ack_slave(self, slave_id: str, framework_id: str, status: TaskStatus) -> None:
        """The slave may forget this update now: its framework has it (or never will)."""
        if status.uuid:
            self.outbox.send_slave(
                slave_id,
                StatusAck(
                    slave_id=slave_id,
                    framework_id=framework_id,
                    task_id=status.task_id,
                    uuid=status.uuid,
                ),
            )

    def from_master(
        self,
        fw: Framework,
        task_id: str,
        slave_id: str,
        state: TaskState,
        reason: Reason,
        message: str,
        *,
        ack: bool = True,
    ) -> None:
        """A status the master itself decides (LOST, ERROR, ...), sent like a slave's. The
        state is the fine one: a framework not partition-aware hears TASK_LOST for it."""
        state, seen_reason = as_seen(state, reason, fw.partition_aware)
        status = TaskStatus(
            task_id=task_id,
            state=state,
            slave_id=slave_id,
            reason=seen_reason,
            source=Source.MASTER,
            message=message,
            uuid=new_id() if ack else None,
        )
        task = fw.tasks.get(task_id)
        if task is not None and task.slave_id == slave_id:
            task.state, task.status = state, status
            if state.terminal:
                self.finish(fw, task, status)
            else:
                self.outbox.task_changed(task)
        self.forward(fw, Update(status=status), slave_id)

    def finish(self, fw: Framework, task: Task, status: TaskStatus) -> None:
        """A task ended: its resources go back to the pool (unless its slave's latest
        state freed them already) and a round follows."""
        fw.complete(task, status)
        self.listeners.tell_task_ended(fw, task, status)
        slave = self.books.slaves.get(task.slave_id)
        if slave is not None:
            slave.tasks.discard((fw.framework_id, task.task_id))
        if task.freed:  # (the release was told then; its end is news now)
            self.outbox.task_changed(task)
        else:
            self.free(fw, task, status.state)

    def free(self, fw: Framework, task: Task, state: TaskState) -> None:
        """A task's resources go back to the pool, once: when it ends, or as soon as its
        slave's latest state says it ended (its terminal update still to come)."""
        if task.freed:
            return
        task.freed = True
        if task.slave_id in self.books.slaves:
            role = fw.role_of(task.info)
            self.allocator.recover(fw.framework_id, task.slave_id, task.resources, role=role)
        self.outbox.emit(
            "release",
            framework_id=fw.framework_id,
            slave_id=task.slave_id,
            task_id=task.task_id,
            resources=task.resources,
            state=state,
        )
        self.request_round()
