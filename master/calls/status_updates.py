"""What the master does with a slave's status update (its sender already checked).

A slave sends a task's updates as a stream (slave.updates): one at a time, the next once
its framework acknowledged the one before, each carrying the task's latest state there.
So the master:

- frees a task's resources as soon as an update's `latest_state` is terminal, though the
  terminal update itself may wait on the slave behind updates not yet acknowledged;
- forwards every new update to the framework, in the order they come;
- acknowledges, and does not forward, an update the framework has acknowledged already
  (a re-send that crossed the acknowledgement) or one that would take the task back to
  an earlier state than its framework heard (a late re-send from an older slave).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from master.authz import Caller
from master.books import Books, Framework, Task
from master.outbox import Outbox
from master.task_states import as_seen, regresses
from master.updates import TaskUpdates
from protocol.wire.messages import StatusUpdate, TaskState, Update


class StatusUpdates:
    def __init__(self, books: Books, outbox: Outbox, updates: TaskUpdates, log: Any) -> None:
        self.books, self.outbox, self.updates, self.log = books, outbox, updates, log

    async def take(self, msg: StatusUpdate, caller: Caller) -> None:
        status = msg.status
        fw = self.books.frameworks.get(msg.framework_id)
        if fw is None:
            # Not acknowledged: the slave keeps re-sending until the framework is back
            # (or is shut down there). An orphan's end is kept (a drain waits for it).
            orphan = self.books.orphans.get(msg.framework_id, msg.slave_id, status.task_id)
            if orphan is not None and status.state.terminal and not orphan.state.terminal:
                self.books.orphans.replace(orphan, replace(orphan, state=status.state))
            self.log.info(
                "status.framework_unknown",
                framework_id=msg.framework_id,
                task_id=status.task_id,
                state=status.state,
            )
            return
        # A slave speaks only for tasks on its own slaves: one the master knows elsewhere
        # is refused; one it does not know at all, only from the slave that named it as
        # ending when it registered again (below: a master that restarted knows no tasks
        # until the slaves come back, and one slave must not end another's in that window).
        key = (fw.framework_id, status.task_id)
        known = fw.tasks.get(status.task_id)
        where = fw.slave_of(status.task_id)
        if where is not None and where != msg.slave_id:
            self._not_its(msg, caller, f"is on slave {where}, not {msg.slave_id}")
            return
        if status.uuid in fw.pending:
            self._latest_state(fw, known, msg)  # (a re-sent head may say the task ended)
            return  # a re-sent duplicate: already owed to the framework
        if self._heard_already(fw, msg):
            self.updates.ack_slave(msg.slave_id, fw.framework_id, status)
            return
        # (a task the master does not know is this slave's to report if it named it)
        ours = known is not None or self.books.ending.get(key) == msg.slave_id
        if status.state.terminal and ours:
            self.books.ended(key)
            fw.unreachable.pop(status.task_id, None)  # it ended while out of touch
        ended = fw.completed.get(status.task_id)
        if ended is not None and ended.uuid != status.uuid and status.task_id not in fw.tasks:
            # the framework already heard this task end (lost with its slave, say):
            # one ending is all it gets
            self.log.info(
                "status.after_end",
                framework_id=fw.framework_id,
                task_id=status.task_id,
                state=status.state,
                ended=ended.state,
            )
            self.updates.ack_slave(msg.slave_id, fw.framework_id, status)
            return
        if not ours:
            self._not_its(
                msg,
                caller,
                f"is not known on slave {msg.slave_id}: a slave reports the tasks it "
                "registered with, or named as ending",
            )
            return
        task = fw.tasks.get(status.task_id)
        if task is not None:
            task.state, task.status = status.state, status
            if status.uuid:
                task.relay(status.uuid)
            if status.state.terminal:
                self.updates.finish(fw, task, status)
            else:
                self.outbox.task_changed(task)
                self._latest_state(fw, task, msg)
        elif status.state.terminal:
            # a task this master never knew ran (it ended across a failover): remembered,
            # so that reconciling it answers how it ended, not that it is unknown
            fw.declare_ended(status)
        if status.state == TaskState.DROPPED and not fw.partition_aware:
            # a slave's answer for a task it never got (slave.reports.TaskReports.answer):
            # TASK_LOST to a framework not partition-aware, as a Mesos agent answers it
            state, reason = as_seen(status.state, status.reason, False)
            status = status.model_copy(update={"state": state, "reason": reason})
        self.updates.forward(fw, Update(status=status), msg.slave_id, relayed=True)
        self.outbox.state_changed()

    def _not_its(self, msg: StatusUpdate, caller: Caller, why: str) -> None:
        """A slave's update of a task that is not its to report: refused, not forwarded."""
        task_id = msg.status.task_id
        self.outbox.refuse(
            caller,
            f"task {task_id} of framework {msg.framework_id} {why}",
            "forbidden",
            "StatusUpdate",
            slave_id=msg.slave_id,
            framework_id=msg.framework_id,
            task_id=task_id,
        )

    def _latest_state(self, fw: Framework, task: Task | None, msg: StatusUpdate) -> None:
        """The task ended on its slave: its resources are free now, whatever updates of
        it its framework has still to hear (Mesos's `latest_state`)."""
        if task is not None and msg.latest_state is not None and msg.latest_state.terminal:
            self.updates.free(fw, task, msg.latest_state)

    def _heard_already(self, fw: Framework, msg: StatusUpdate) -> bool:
        """A duplicate its framework acknowledged, or a stale update: logged, and true."""
        status = msg.status
        task = fw.tasks.get(status.task_id) or fw.ended.get(status.task_id)
        if task is None:
            return False  # (a master that restarted: forwarded, as Mesos does)
        if status.uuid and status.uuid in task.relayed:
            why = "duplicate"
        elif task.task_id in fw.tasks and regresses(status.state, heard_state(task)):
            why = "stale"
        else:
            return False
        self.log.info(
            "status.dropped",
            why=why,
            framework_id=fw.framework_id,
            task_id=status.task_id,
            state=status.state,
            heard=heard_state(task),
        )
        self._latest_state(fw, fw.tasks.get(status.task_id), msg)
        return True


def heard_state(task: Task) -> TaskState:
    """The state a task's framework last heard: not the master's own KILLING, which it
    marks when it sends a kill (a preemption's) and which no update told anyone."""
    return task.status.state if task.status is not None else TaskState.STAGING
