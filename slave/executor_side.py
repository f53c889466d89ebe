"""The slave's side of custom executors: start them, talk to them, and outlive them.

Each executor speaks to this slave over its own private line (`slave.executors`), so
whatever it sends is taken as from *that* framework's executor: the framework and
executor ids in its messages are the slave's, not the executor's, to say.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Container
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from protocol import logs
from protocol.refusal_sampling import RateLimiter, RefusalSampling
from protocol.transport.base import Transport
from protocol.wire.codec import DecodeError
from protocol.wire.messages import (
    CheckExecutorToken,
    Error,
    ExecutorExited,
    ExecutorRegistered,
    ExecutorTokenChecked,
    FrameworkMessage,
    Reason,
    RegisterExecutor,
    RunTask,
    Source,
    StatusUpdate,
    TaskState,
    Wire,
)
from protocol.wire.resources import Resources
from slave.cgroups import MB
from slave.executor_tokens import ExecutorTokens, TokenError
from slave.executors import REGISTRATION_TIMEOUT, ExecutorProcess
from slave.isolator import Isolator, executor_container_name
from slave.message_budget import (
    BYTES_A_SECOND,
    MESSAGES_A_SECOND,
    UPDATES_A_SECOND,
    UPDATES_AT_ONCE,
    Bucket,
    MessageBudget,
    UpdatePace,
)
from slave.sandbox import make_task_sandbox
from slave.tenancy import Tenancy

if TYPE_CHECKING:
    from slave.config import TaskRecord
    from slave.reports import TaskReports


REFUSED_A_SECOND = 10.0  # an executor's messages refused, a second, past ...
MOST_REFUSED = 1_000  # ... a burst of these: more, and it is stopped
BAD_BYTES = 64 * 1024  # a frame that is no message counts a refusal for each of these
MOST_EXECUTORS_SAMPLED = 4_096  # (executors whose refusal lines are counted, at most)


# a shell's and execve's codes for a command that never ran, and what an operator does
NEVER_RAN = {
    126: "its program could not be run by the task's user (not executable, or under a "
    "directory that user may not pass: the slave's isolation.python_unreachable warning "
    "at its start says so, and what to give --task-env DRFMESOS_PYTHON)",
    127: "its program was not found (its command's first word, or $DRFMESOS_PYTHON)",
}


def exit_detail(executor_id: str, code: int, broken: str | None) -> str:
    """A task's message when its executor exited: the status, what a status of a command
    that never ran means, and why the executor's line to the slave broke, if it did."""
    detail = f"executor {executor_id} exited with status {code}"
    if code in NEVER_RAN:
        return f"{detail}: {NEVER_RAN[code]}"
    return detail + (f" (stopped: {broken})" if broken else "")


class TaskEnv(Protocol):
    """A task's or executor's whole environment (`Slave._task_env`)."""

    def __call__(
        self,
        msg: RunTask,
        framework: dict[str, str],
        sandbox: Path,
        extra: dict[str, str] | None = None,
    ) -> dict[str, str]: ...


class ExecutorSide:
    """Built by the slave with what it shares with its executors (its tasks and executors
    by key, the frameworks it shut down, its bus and isolator) and what it does for
    their tasks (sandboxes, environment, checkpoints, status reports): a collaborator,
    not a mixin, so what each side may touch is in this signature."""

    def __init__(
        self,
        slave_id: str,
        bus: Transport,
        to_master: str,
        isolator: Isolator,
        tasks: dict[tuple[str, str], TaskRecord],
        shut_down_frameworks: Container[str],
        *,
        sandbox: Callable[[str, str], Path],
        executor_sandbox: Callable[[str, str], Path],
        env: TaskEnv,
        checkpoint: Callable[[TaskRecord], Awaitable[None]],
        reports: TaskReports,
        tenancy: Callable[[], Tenancy],
        grace: Callable[[TaskRecord], float],
        registration_timeout: float = REGISTRATION_TIMEOUT,
    ) -> None:
        self.slave_id, self.bus, self.to_master = slave_id, bus, to_master
        self.isolator, self.tasks, self.shut_down_frameworks = isolator, tasks, shut_down_frameworks
        self.executors: dict[tuple[str, str], ExecutorProcess] = {}  # by (framework, executor)
        # what each principal's executors may say here (one budget for all of them, and
        # kept when they exit: more executors, or one started again, say no more)
        self._budgets: dict[str, MessageBudget] = {}
        self._paces: dict[str, UpdatePace] = {}  # (all they say: `_paced`)
        self._sandbox, self._env, self._checkpoint = sandbox, env, checkpoint
        self._reports = reports  # (its tasks' states, told to the master)
        self._executor_sandbox = executor_sandbox  # (apart from every task's: slave.paths)
        self._tenancy = tenancy  # (decided as the slave starts)
        self._grace = grace  # a task's kill grace, as the slave gives it
        self._registration_timeout = registration_timeout  # (an executor's: 0, none)
        # lines and Errors refusing each executor, sampled; refusals past a burst stop it
        self._refusals = RefusalSampling(most_keys=MOST_EXECUTORS_SAMPLED)
        self._misbehaving = RateLimiter(rate=REFUSED_A_SECOND, burst=MOST_REFUSED)
        self._flush: asyncio.TimerHandle | None = None
        # what was dropped for each executor (framework messages, answers) since the last
        # said, by (framework, executor, its event): MAX_WAITING
        self._undelivered: dict[tuple[str, str, str], int] = {}
        self.tokens: ExecutorTokens | None = None  # (its key is read as the slave starts)
        self.log = logs.get("slave", slave_id=slave_id)

    async def run_task(self, msg: RunTask, record: TaskRecord) -> None:
        """Run a task on its executor, started for it if it is not running yet."""
        info = msg.task.executor
        assert info is not None
        # the task's own files, apart from its executor's log and its other tasks' lines
        # (made first: a task that cannot have them fails before any executor starts)
        tenancy = self._tenancy()
        user = await tenancy.user_for(msg.principal)  # (the executor's and its tasks')
        sandbox = self._sandbox(msg.framework_id, msg.task.task_id)
        sandbox = await make_task_sandbox(sandbox, user)
        ekey = (msg.framework_id, info.executor_id)
        record.executor_key = ekey
        executor = self.executors.get(ekey)
        if executor is None:
            own = self._executor_sandbox(msg.framework_id, info.executor_id)
            ids = {
                "DRFMESOS_EXECUTOR_ID": info.executor_id,
                "DRFMESOS_FRAMEWORK_NAME": msg.framework_name,
            }
            if self.tokens is not None:  # (what it proves it is with: slave.executor_tokens)
                token = self.tokens.issue(msg.framework_id, info.executor_id)
                ids["MESOS_EXECUTOR_AUTHENTICATION_TOKEN"] = token
            executor = ExecutorProcess(
                msg.framework_id,
                info,
                own,
                self._env(msg, info.command.environment, own, ids),
                self._from_executor,
                self._bad_from_executor,
                self._executor_exited,
                user,
                tenancy.confinement,
                msg.principal,
                self._registration_timeout,
            )
            self.executors[ekey] = executor
            try:
                executor.container = await self.isolator.prepare(
                    executor_container_name(msg.framework_id, info.executor_id),
                    info.resources + msg.task.resources,
                    msg.principal,
                )
                await executor.start()
            except (OSError, ValueError) as e:  # (ValueError: NUL in an argument or the env)
                del self.executors[ekey]
                if executor.container is not None:  # (and out of its principal's group)
                    await executor.container.destroy()
                await self._reports.report(
                    msg.framework_id,
                    msg.task,
                    TaskState.FAILED,
                    Reason.EXECUTOR_TERMINATED,
                    f"executor did not start: {e}",
                    Source.SLAVE,
                )
                self.executor_not_started(msg)
                return
            self.log.info(
                "executor.started",
                framework_id=msg.framework_id,
                executor_id=info.executor_id,
                pid=executor.pid,
            )
        else:
            await self._resize(executor, msg.task.resources)
        executor.tasks.add(msg.task.task_id)
        await self._checkpoint(record)
        # (its kill grace: a kill the executor makes itself, its health check's, gives it;
        # the master's proof of the launch is the slave's to show, not the executor's)
        executor.send(
            msg.model_copy(
                update={"sandbox": str(sandbox), "kill_grace": self._grace(record), "proof": ""}
            )
        )

    def new_executor(self, msg: RunTask) -> Resources:
        """What a task's executor takes besides the task: its own resources if this task
        starts it (as the master counts it), else nothing."""
        info = msg.task.executor
        if info is None or (msg.framework_id, info.executor_id) in self.executors:
            return Resources()
        return info.resources

    def executor_not_started(self, msg: RunTask) -> None:
        """The master took a new executor's resources from the offer with this task: the
        executor never ran, so say it ended, and the master gives them back."""
        info = msg.task.executor
        if info is not None and (msg.framework_id, info.executor_id) not in self.executors:
            self.tell_exited(msg.framework_id, info.executor_id, -1)

    def tell_exited(
        self,
        framework_id: str,
        executor_id: str,
        status: int,
        *,
        checked: bool = False,
        ask: int = 0,
    ) -> None:
        """The master hears an executor is gone (unless its framework is being shut down);
        `checked`: as it asked (CheckExecutors, numbered `ask`), of one not run here."""
        if framework_id not in self.shut_down_frameworks:
            self.bus.post(
                self.to_master,
                ExecutorExited(
                    framework_id=framework_id,
                    slave_id=self.slave_id,
                    executor_id=executor_id,
                    status=status,
                    checked=checked,
                    ask=ask,
                ),
            )

    async def _from_executor(self, executor: ExecutorProcess, message: Wire) -> None:
        """What an executor says; its identity is the line it came on."""
        fid, eid = executor.framework_id, executor.executor_id
        await self._paced(executor)  # (every kind: a token check costs as an update does)
        if isinstance(message, RegisterExecutor):
            if self._holder(message.token) != executor.key:
                self._tell_executor(
                    executor,
                    "registration refused: not this executor's token "
                    "(MESOS_EXECUTOR_AUTHENTICATION_TOKEN)",
                    "unauthenticated",
                    "RegisterExecutor",
                )
                return
            executor.mark_registered(
                ExecutorRegistered(slave_id=self.slave_id, framework_id=fid, executor_id=eid)
            )
            self.log.info("executor.registered", framework_id=fid, executor_id=eid)
        elif isinstance(message, CheckExecutorToken):
            holder = self._holder(message.token) or ("", "")
            checked = ExecutorTokenChecked(
                request_id=message.request_id, framework_id=holder[0], executor_id=holder[1]
            )
            self._said(executor, "answer.undelivered", executor.answer(checked))
        elif isinstance(message, StatusUpdate):
            task_id = message.status.task_id
            record = self.tasks.get((fid, task_id))
            if record is None or record.executor_key != executor.key:
                self._tell_executor(
                    executor,
                    f"no task {task_id} runs on this executor",
                    "unknown-task",
                    "StatusUpdate",
                )
                return
            status = message.status  # (its health check's verdict too: the executor runs it)
            await self._reports.report(
                fid, record.info, status.state, status.reason, status.message,
                healthy=status.healthy,
            )  # fmt: skip
        elif isinstance(message, FrameworkMessage):
            if not self._within_budget(executor, len(message.data)):
                return
            self.bus.post(
                self.to_master,
                FrameworkMessage(
                    framework_id=fid, slave_id=self.slave_id, executor_id=eid, data=message.data
                ),
            )
        else:
            self._tell_executor(
                executor,
                f"the slave does not take {message.TYPE} from an executor",
                "unexpected-type",
                message.TYPE,
            )

    async def _paced(self, executor: ExecutorProcess) -> None:
        """A message of `executor`'s waits its principal's pace here (UpdatePace): nothing
        more is read from the executor meanwhile, the others' lines are read on. Every
        kind is paced, not its status updates alone: a token check answered as fast as an
        executor asked held another tenant's `true` task 2.0 s, against 80 ms (attack87).
        One that has exited waits no more: what it wrote before is at most a socket
        buffer's worth, and is heard before its exit (`ExecutorProcess._watch`)."""
        if executor.exited:
            return
        pace = self._paces.get(executor.principal)
        if pace is None:
            pace = UpdatePace(Bucket(UPDATES_A_SECOND, UPDATES_AT_ONCE))
            self._paces[executor.principal] = pace
        delay = pace.delay(time.monotonic())
        if delay > 0:
            executor.paced = True
            if pace.paced == 1:  # (said once a time it is past its burst)
                self.log.warning(
                    "executor.updates_paced",
                    framework_id=executor.framework_id,
                    executor_id=executor.executor_id,
                    rate=UPDATES_A_SECOND,
                    burst=UPDATES_AT_ONCE,
                )
            await asyncio.sleep(delay)

    def _within_budget(self, executor: ExecutorProcess, nbytes: int) -> bool:
        """Whether an executor's message to its framework is within its principal's
        budget (slave.message_budget); the first one over it is told and logged, and how
        many were dropped once one passes again."""
        budget = self._budgets.setdefault(executor.principal, MessageBudget())
        dropped = budget.dropped
        if budget.take(nbytes, time.monotonic()):
            if dropped:
                budget.dropped = 0
                ids = {"framework_id": executor.framework_id, "executor_id": executor.executor_id}
                self.log.warning("executor.messages_dropped", dropped=dropped, **ids)
            return True
        if not dropped:
            self._tell_executor(
                executor,
                "framework messages over its principal's budget on this slave are dropped "
                f"(at most {MESSAGES_A_SECOND:g} messages and {BYTES_A_SECOND / 2**20:g} MiB "
                "a second)",
                "rate-limited",
                "FrameworkMessage",
            )
        return False

    def _holder(self, token: str) -> tuple[str, str] | None:
        """The executor a token was issued to, if it is one of this slave's."""
        try:
            return self.tokens.holder(token) if self.tokens is not None else None
        except TokenError:
            return None

    async def _bad_from_executor(self, executor: ExecutorProcess, error: DecodeError) -> None:
        await self._paced(executor)
        # (a refusal for each BAD_BYTES of it: reading and decoding it was the slave's
        # CPU, a core's for 4 MiB frames of garbage, a thousand of them before a stop)
        cost = 1.0 + error.size / BAD_BYTES
        self._tell_executor(
            executor, f"{error.reason}: {error.detail}", error.reason, error.type_name, cost
        )

    def _tell_executor(
        self,
        executor: ExecutorProcess,
        message: str,
        code: str,
        about: str | None,
        cost: float = 1.0,
    ) -> None:
        """Refuse what an executor said: a line in the slave's log and an Error back on
        its line, each sampled as the master samples its refusals of a principal's calls
        (protocol.refusal_sampling: a few lines a second, each counting those left out,
        and a few hundred Errors); and an executor refused faster than REFUSED_A_SECOND
        past a burst of MOST_REFUSED is stopped: the slave's log, and its time, are
        every tenant's."""
        key, now = repr(executor.key), time.monotonic()
        if code != "rate-limited" and not self._misbehaving.admit(key, now, cost):
            why = f"over {MOST_REFUSED} messages refused (the last: {logs.clip(message)})"
            if executor.stop(why):
                ids = {"framework_id": executor.framework_id, "executor_id": executor.executor_id}
                self.log.warning("executor.stopped", why=why, **ids)
            return
        said = {
            "framework_id": executor.framework_id,
            "executor_id": executor.executor_id,
            "reason": logs.clip(message),
            "code": code,
        }
        sampled = self._refusals.line(key, code, now, said)
        if sampled is None:
            self._flush_later()
        else:
            self.log.warning("executor.refused", **said, **sampled)
        if self._refusals.answer(key, now):
            executor.send(Error(message=message, code=code, about=about))

    def _flush_later(self) -> None:
        """The refusal lines left out are told, with their counts, once their executor's
        rate lets them: a burst that stops is told whole."""
        if self._flush is None:
            self._flush = asyncio.get_running_loop().call_later(1.0, self._flush_due)

    def _flush_due(self) -> None:
        self._flush = None
        for _, said, sampled in self._refusals.due(time.monotonic()):
            self.log.warning("executor.refused", **said, **sampled)
        if self._refusals.unlogged:
            self._flush_later()

    async def on_framework_message(self, msg: FrameworkMessage, reply_to: str | None) -> None:
        """Scheduler -> executor (it came from the master, on this slave's own topic)."""
        executor = self.executors.get((msg.framework_id, msg.executor_id))
        if executor is not None:
            self._deliver(executor, msg)
        else:
            self.log.warning(
                "message.no_executor", framework_id=msg.framework_id, executor_id=msg.executor_id
            )

    def _deliver(self, executor: ExecutorProcess, msg: FrameworkMessage) -> None:
        """Hand a framework's message to its executor, unless it cannot take it (not
        registered, or not reading: slave.executors)."""
        self._said(executor, "message.undelivered", executor.send_framework_message(msg))

    def _said(self, executor: ExecutorProcess, event: str, why: str | None) -> None:
        """What was for the executor went (`why` None), or was dropped, `why`: the first
        of a run of drops logged, and how many once one passes again (a tenant cannot
        fill the log)."""
        key = (*executor.key, event)
        ids = {"framework_id": executor.framework_id, "executor_id": executor.executor_id}
        dropped = self._undelivered.get(key, 0)
        if why is None:
            if dropped:
                del self._undelivered[key]
                self.log.warning(event, dropped=dropped, **ids)
            return
        self._undelivered[key] = dropped + 1
        if not dropped:
            self.log.warning(event, why=why + ": dropped until it takes them", **ids)

    async def _resize(self, executor: ExecutorProcess, new: Resources | None = None) -> None:
        """Size an executor's container to it and its live tasks (and a `new` one's
        resources): grown as tasks come, shrunk as they end (as Mesos does)."""
        if executor.container is None or executor.shutting_down:
            return
        total = executor.info.resources + (new or Resources())
        for task_id in executor.tasks:
            record = self.tasks.get((executor.framework_id, task_id))
            if record is not None and not record.state.terminal:
                total = total + record.info.resources
        total = total.quantities()  # (a cgroup limits cpus, whoever's)
        if new is None and (mem := total.get("mem")) is not None:
            # shrinking: the memory limit goes no lower than what the executor holds now
            # (v1 refuses that, v2 would OOM-kill it), as Mesos keeps its hard limit
            [held] = await self.isolator.usage([(executor.container, executor.pid or 0)])
            total = Resources({**total, "mem": max(mem, math.ceil(held.memory_bytes / MB))})
            if self.executors.get(executor.key) is not executor or executor.shutting_down:
                return  # it exited meanwhile: its container is gone, not to be made again
        try:
            await self.isolator.prepare(executor.container.name, total, executor.principal)
        except OSError as e:  # (a memory limit below what it uses now: v1 says EBUSY)
            self.log.warning(
                "isolation.resize_failed",
                framework_id=executor.framework_id,
                executor_id=executor.executor_id,
                error=str(e),
            )

    async def task_left(self, executor_key: tuple[str, str] | None) -> None:
        """One of an executor's tasks ended: its container shrinks by it."""
        executor = self.executors.get(executor_key) if executor_key is not None else None
        if executor is not None:
            await self._resize(executor)

    async def _executor_exited(self, executor: ExecutorProcess, code: int) -> None:
        self.executors.pop(executor.key, None)
        self._misbehaving.forget(repr(executor.key))
        for key in [k for k in self._undelivered if k[:2] == executor.key]:
            del self._undelivered[key]  # (its drops of every kind: `_said`)
        limited = None
        if executor.container is not None:
            limited = await executor.container.limitation()
            await executor.container.destroy()
        self.log.info(
            "executor.exited",
            framework_id=executor.framework_id,
            executor_id=executor.executor_id,
            status=code,
        )
        for task_id in list(executor.tasks):
            record = self.tasks.get((executor.framework_id, task_id))
            if record is not None and not record.state.terminal:
                # a task the master killed ends KILLED (with the kill's reason), however
                # its executor went; another FAILED
                killed = record.kill_reason is not None and not limited
                reason = Reason.EXECUTOR_TERMINATED
                if limited:
                    reason = Reason.MEMORY_LIMIT
                elif executor.timed_out:
                    reason = Reason.EXECUTOR_REGISTRATION_TIMEOUT
                await self._reports.report(
                    executor.framework_id,
                    record.info,
                    TaskState.KILLED if killed else TaskState.FAILED,
                    reason,
                    limited or exit_detail(executor.executor_id, code, executor.broken),
                    Source.SLAVE,
                )
        self.tell_exited(executor.framework_id, executor.executor_id, code)
