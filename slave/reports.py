"""How the slave tells of its tasks' states: each new state written down, then sent to
the master until it acknowledges it (slave.updates), once a task. Whoever sees a task
change state reports it here: its runner, its executor (slave.executor_side), the
slave's refusals and kills, and recovery after a restart (slave.recovery).

A task ends once (what follows its end is dropped); one the master killed says why the
master did, whatever its runner or executor said; and every update carries what its
health check last said, whoever checks it (the slave, or the task's executor). A task
the master asks after that the slave never got is TASK_DROPPED (`answer`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Container
from typing import Any

from protocol import logs
from protocol.wire.messages import (
    Reason,
    Reconcile,
    Source,
    StatusUpdate,
    TaskInfo,
    TaskState,
    TaskStatus,
    new_id,
)
from slave.config import TaskRecord, killed_by_master
from slave.runners import Report
from slave.updates import OwedUpdates

Key = tuple[str, str]  # (framework id, task id)
# a runner's end the slave decided, not the task's command executor: a limit the slave
# holds the task to (memory, disk, ports), as Mesos's agent sends a container's
# limitation, SOURCE_SLAVE
DECIDED_BY_SLAVE = frozenset({Reason.DISK_LIMIT, Reason.MEMORY_LIMIT, Reason.CONTAINER_LIMITATION})


class TaskReports:
    """Built by the slave with its books (its tasks by key, the frameworks it shut down),
    its owed updates, and what it does as a task ends (`forget`: out of its books;
    `ended`: that and its executor too; `uncheckpoint`: its record dropped, behind the
    update that ends it in the same write) or runs on (`checkpoint`: recorded with the
    update that says so, in a journal of the updates' file)."""

    def __init__(
        self,
        slave_id: str,
        tasks: dict[Key, TaskRecord],
        shut_down_frameworks: Container[str],
        updates: OwedUpdates,
        log: Any,
        *,
        forget: Callable[[Key], None],
        ended: Callable[[Key], Awaitable[None]],
        checkpoint: Callable[[TaskRecord], None],
        uncheckpoint: Callable[[Key], None],
    ) -> None:
        self.slave_id, self.tasks, self.shut_down_frameworks = slave_id, tasks, shut_down_frameworks
        self.updates, self.log = updates, log
        self._forget, self._ended, self._checkpoint = forget, ended, checkpoint
        self._uncheckpoint = uncheckpoint

    def reporter(self, record: TaskRecord) -> Report:
        """How `record`'s runner reports its task's states.

        (It holds the record's framework and task, which never change, not the record:
        the record holds its runner, the runner this, and that cycle outlived each task
        until a collection found it, some 17 objects a task, the slaves' process of
        benchmarks.e2e 7-9% of its CPU in the collector.)"""
        framework_id, info = record.framework_id, record.info

        async def report(
            state: TaskState, reason: Reason | None, message: str, *, exit_code: int | None = None
        ) -> None:
            source = Source.SLAVE if reason in DECIDED_BY_SLAVE else Source.EXECUTOR
            await self.report(
                framework_id, info, state, reason, message, source, exit_code=exit_code
            )

        return report

    async def report(
        self,
        framework_id: str,
        task: TaskInfo,
        state: TaskState,
        reason: Reason | None,
        message: str,
        source: Source = Source.EXECUTOR,
        *,
        exit_code: int | None = None,
        healthy: bool | None = None,
    ) -> None:
        """A task changed state: write the update down, then tell the master. `source`:
        the slave when it decides the state itself (an executor that ended, a refusal);
        `healthy`: its executor's health check's verdict, when it says one."""
        key = (framework_id, task.task_id)
        record = self.tasks.get(key)
        if record is not None:
            if record.state.terminal:
                return  # a task ends once
            record.state = state
            if healthy is not None:
                record.healthy = healthy
            if state == TaskState.KILLED and record.kill_reason is not None:
                reason, message = record.kill_reason, killed_by_master(record.kill_reason, message)
                if record.kill_gone:  # (as a Mesos agent that drains to be marked gone)
                    state = TaskState.GONE_BY_OPERATOR
        if framework_id in self.shut_down_frameworks:
            self._forget(key)
            return
        # (validated as built, from one map, the status's within it: quicker than
        # `model_construct`, see master.outbox.Outbox.emit, and than a TaskStatus built by
        # keywords and then its update, 6.5 us where this is 4)
        status = {
            "task_id": task.task_id,
            "state": state,
            "slave_id": self.slave_id,
            "reason": reason,
            "source": source,
            "message": message,
            "uuid": new_id(),
            "executor_id": task.executor.executor_id
            if task.executor
            else record.executor_key[1]  # (a task group's: the executor the slave plays)
            if record is not None and record.executor_key is not None
            else None,
            "exit_code": exit_code,
            "healthy": record.healthy if record is not None else healthy,
            "timestamp": time.time(),  # (the update's own: what is journaled says it too)
        }
        # a task that runs on is checkpointed with its update (one write, one sync); one
        # that ended has its checkpoint dropped behind its end's update, in the same write:
        # the end is sent once that is on disk (slave.updates), so a restart never finds
        # the task again after its end was heard, and nothing here waits for the disk
        along: Callable[[], None] | None = None
        if state.terminal:
            along = functools.partial(self._uncheckpoint, key)
        elif record is not None and record.runner is not None:
            along = functools.partial(self._checkpoint, record)
        # (its own state the task's latest as it is made: sent as made while it is)
        made = {
            "framework_id": framework_id,
            "slave_id": self.slave_id,
            "status": status,
            "latest_state": state,
        }
        update = StatusUpdate.model_validate(made)
        status["message"] = update.status.message  # (as validated: a long one is cut)
        self.updates.owe(update, along, made)  # (journaled as made: it validates as it is)
        self.log.info(
            "task.status",
            framework_id=framework_id,
            task_id=task.task_id,
            state=state.value,
            reason=reason,
            detail=logs.clip(message),  # (an executor's text: cut for our log)
        )
        if state.terminal:
            await self._ended(key)

    def answer(self, ask: Reconcile) -> None:
        """The master asks after tasks it launched here that a (re-)registration did not
        name (it may have been sent before their launch arrived): as a Mesos agent
        answers ReconcileTasksMessage, one it never got is TASK_DROPPED (the master frees
        what it booked for it); one it runs, or whose end is still owed, says so itself.
        The ask comes behind the launch on this slave's topic: a launch that arrived is
        known by now."""
        owed = {(e.framework_id, e.task_id) for e in self.updates.ending()} if ask.tasks else set()
        for asked in ask.tasks:
            key = (ask.framework_id, asked.task_id)
            if key in self.tasks or key in owed:
                continue
            self.log.warning("reconcile.never_got", framework_id=key[0], task_id=key[1])
            status = TaskStatus(
                task_id=asked.task_id,
                state=TaskState.DROPPED,
                slave_id=self.slave_id,
                reason=Reason.RECONCILIATION,
                source=Source.SLAVE,
                message=f"slave {self.slave_id} never got this task",
                uuid=new_id(),
            )
            self.updates.owe(
                StatusUpdate(framework_id=ask.framework_id, slave_id=self.slave_id, status=status)
            )
