"""The executor a slave plays for task groups (Mesos's LAUNCH_GROUP and its default
executor): a group is checked whole and its tasks run as command tasks, each in its own
container, or none of them does; as a task of it ends, a failed or killed one takes its
siblings down (slave.task_groups keeps which they are), and the executor ends with its
last task, the master told so that its resources go back.

No process of its own runs: the slave is the executor, so its resources are booked by
the master and held here (`TaskGroups.used`), and nothing is started in them.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Coroutine
from typing import Any, Protocol

from protocol import logs
from protocol.transport.base import Transport
from protocol.wire.discrete import Discrete
from protocol.wire.messages import CheckExecutors, Reason, RunTask, RunTasks, Source, TaskState
from protocol.wire.resources import Resources
from slave.config import TaskRecord
from slave.launches import run_together
from slave.reports import TaskReports
from slave.task_groups import TaskGroups

TaskKey = tuple[str, str]  # (framework, task)


class TellExited(Protocol):
    def __call__(
        self,
        framework_id: str,
        executor_id: str,
        status: int,
        *,
        checked: bool = False,
        ask: int = 0,
    ) -> None: ...


class DefaultExecutor:
    def __init__(
        self,
        slave_id: str,
        groups: TaskGroups,
        tasks: dict[TaskKey, TaskRecord],
        custom_executors: Container[tuple[str, str]],
        shut_down_frameworks: dict[str, Any],
        *,
        bus: Transport,
        reports: TaskReports,
        free: Callable[[], Resources],
        checks: Callable[[RunTask], str | None],
        start: Callable[[RunTask, TaskRecord], Coroutine[Any, Any, None]],
        kill: Callable[[TaskRecord, str], None],
        tell_exited: TellExited,
        log: Any,
    ) -> None:
        """`checks`: what the slave checks of any task it runs (its ids, values, owner,
        image); `start`: starts a booked command task; `kill`: begins a task's kill with
        its grace; `tell_exited`: tells the master an executor ended."""
        self.slave_id, self.groups, self.tasks = slave_id, groups, tasks
        self._custom, self._shut_down = custom_executors, shut_down_frameworks
        self.bus, self.reports, self._free, self._checks = bus, reports, free, checks
        self._start, self._kill, self._tell_exited, self.log = start, kill, tell_exited, log

    async def run(self, msg: RunTasks, reply_to: str | None) -> None:
        """A task group: checked whole, then all its tasks started under its executor; or
        none of them, each told why (TASK_ERROR; TASK_DROPPED if its executor ended
        before it came)."""
        group = msg.group
        assert group is not None
        fid, eid = msg.framework_id, group.executor_id
        runs = self.groups.runs(fid, eid)
        runs_tasks = msg.each()
        state, reason, problem = TaskState.ERROR, Reason.TASK_GROUP_INVALID, None
        if not group.starts and not runs:  # (it ended as the master sent this group)
            state, reason = TaskState.DROPPED, Reason.EXECUTOR_TERMINATED
            problem = f"executor {eid} ended before the group came"
        elif (fid, eid) in self._custom:
            problem = f"executor {eid} is a custom executor here, not a task group's"
        else:
            problem = self._problem(runs_tasks, Resources() if runs else group.resources)
        if problem is not None:
            ids = {"framework_id": fid, "executor_id": eid}
            self.log.warning("run.group_refused", reason=logs.clip(problem), **ids)
            self.bus.reply_error(reply_to, problem, code="invalid-task", about="RunTasks")
            for run in runs_tasks:
                await self.reports.report(fid, run.task, state, reason, problem, Source.SLAVE)
            if group.starts and not runs:  # (the master took its resources: back)
                self._tell_exited(fid, eid, -1)
            return
        self._shut_down.pop(fid, None)
        self.groups.start(fid, eid, group.resources, [r.task.task_id for r in runs_tasks])
        starts: list[Coroutine[Any, Any, None]] = []
        for run in runs_tasks:
            task = run.task
            record = TaskRecord(fid, task, TaskState.STAGING, principal=run.principal)
            record.killing, record.proof = run.killing, run.proof
            record.executor_key = (fid, eid)  # (its statuses name its executor)
            self.tasks[(fid, task.task_id)] = record
            self.log.info("run.start", resources=task.resources, framework_id=fid,
                          task_id=task.task_id, executor_id=eid)  # fmt: skip
            starts.append(self._start(run, record))
        await run_together(starts)
        # a task that ended as its siblings were starting killed those started then: the
        # rest are killed now they run
        for run in runs_tasks:
            if why := self.groups.killed(fid, run.task.task_id):
                self.kill_sibling(fid, run.task.task_id, why)

    def _problem(self, runs: list[RunTask], executor: Resources) -> str | None:
        """Why a task group may not run here, all of it (None: it may): what it needs
        with its new executor's resources (`executor`) free, and each task as the slave
        checks a task."""
        need = executor
        for run in runs:
            need = need + run.task.resources
        free = self._free()
        if not free.contains(need):
            return f"the group needs {need} but slave {self.slave_id} has only {free} free"
        held = Discrete()
        for run in runs:
            task = run.task
            if task.slave_id != self.slave_id:
                return f"task {task.task_id} is for slave {task.slave_id}, not {self.slave_id}"
            if (run.framework_id, task.task_id) in self.tasks:
                return f"task {task.task_id} is already running here"
            if task.executor is not None:
                return f"task {task.task_id}: a group's task names no executor of its own"
            if held.overlap(task.discrete):
                return f"task {task.task_id}: {task.discrete} overlap another task's of the group"
            held = Discrete.union([held, task.discrete])
            if (problem := self._checks(run)) is not None:
                return problem
        return None

    async def on_check(self, msg: CheckExecutors, _: str | None) -> None:
        """The master asks after executors it books here that the slave's re-registration
        did not name (read after any launch it sent before the ask): each the slave runs
        neither as a group's nor as a custom executor is answered as ended, `checked`."""
        fid = msg.framework_id
        for eid in dict.fromkeys(msg.executor_ids):
            if (fid, eid) not in self.groups.executors and (fid, eid) not in self._custom:
                self._tell_exited(fid, eid, -1, checked=True, ask=msg.ask)

    async def task_ended(self, record: TaskRecord) -> None:
        """A task ended (its record's state; not terminal: forgotten, its end untold)."""
        state = record.state if record.state.terminal else None
        await self.ended(record.framework_id, record.info.task_id, state)

    async def ended(self, fid: str, task_id: str, state: TaskState | None) -> None:
        """A task ended in `state` (a restarted slave's lost one too): if it was a
        group's, its siblings killed if it failed or was killed, and its executor ended
        (the master told, which frees its resources) if it ran no other task."""
        ended = self.groups.ended(fid, task_id, state)
        for task_id in ended.kill:
            why = self.groups.killed(fid, task_id)
            if self.kill_sibling(fid, task_id, why) and self.tasks[(fid, task_id)].killing:
                sibling = self.tasks[(fid, task_id)]
                await self.reports.report(fid, sibling.info, TaskState.KILLING, None, why)
        if ended.executor is not None:
            self.log.info(
                "executor.exited", framework_id=fid, executor_id=ended.executor.executor_id
            )
            self._tell_exited(fid, ended.executor.executor_id, 0)

    def kill_sibling(self, framework_id: str, task_id: str, why: str) -> bool:
        """Kill a task of a group whose sibling failed or was killed, with its own grace,
        once (a task ended, in its kill already, or not started yet is left): whether a
        kill began. (Recovery's too, for a sibling restored after such an end.)"""
        sibling = self.tasks.get((framework_id, task_id))
        if sibling is None or sibling.runner is None or sibling.kill is not None:
            return False
        if sibling.state.terminal:
            return False
        self._kill(sibling, why)
        return True
