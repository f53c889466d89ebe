"""The executor side of the SDK: what a custom executor program is written against.

    class Sleeper(Executor):
        async def launch_task(self, driver, task):
            driver.spawn(self.work(driver, task))      # return quickly; work in a task

        async def work(self, driver, task):
            await driver.send_status_update(TaskStatus(task_id=task.task_id,
                                                       state=TaskState.RUNNING))
            await asyncio.sleep(2)
            await driver.send_status_update(TaskStatus(task_id=task.task_id,
                                                       state=TaskState.FINISHED))

    asyncio.run(ExecutorDriver(Sleeper()).run())

The slave starts the program with a private line to itself (`DRFMESOS_EXECUTOR_FD`), its
coordinates (`DRFMESOS_SLAVE_ID`, `DRFMESOS_FRAMEWORK_ID`, `DRFMESOS_EXECUTOR_ID`) and its
token (`MESOS_EXECUTOR_AUTHENTICATION_TOKEN`, signed by the slave) in the environment; the
driver registers over that line with the token and calls the executor's callbacks.
An executor never touches the cluster's bus and needs no credentials. Status updates go
to the slave, which keeps them until the master has them.

Each task has a sandbox of its own (`driver.sandbox(task_id)`), made by the slave: write
a task's output there with `await driver.output(task_id, "line\n")`, and it is what
reading that task's stdout shows, apart from the other tasks' lines and the executor's
own log (the executor's stdout and stderr, in the executor's sandbox).

A task with a `health_check` is checked by the driver from its first TASK_RUNNING
(frameworks.executor_health): its framework hears its verdicts, and after its
consecutive failures the driver calls the executor's `kill_task` for it, as a kill from
the slave would, with the task's grace (`driver.kill_grace(task_id)`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, Literal

from frameworks import callbacks
from frameworks.calls import Made, made_at_once
from frameworks.errors import DriverError
from frameworks.executor_health import ExecutorHealth
from protocol import logs
from protocol.transport.aio import cancel_and_wait, within
from protocol.transport.channel import Channel, ChannelClosed
from protocol.wire.codec import DecodeError
from protocol.wire.messages import (
    CheckExecutorToken,
    Error,
    ExecutorRegistered,
    ExecutorTokenChecked,
    FrameworkMessage,
    KillTask,
    RegisterExecutor,
    RunTask,
    ShutdownExecutor,
    ShutdownFramework,
    StatusUpdate,
    TaskInfo,
    TaskStatus,
    Wire,
    new_id,
)

TOKEN_VARIABLE = "MESOS_EXECUTOR_AUTHENTICATION_TOKEN"  # as Mesos names it


class Executor:
    """Override what you need; every callback is a no-op by default."""

    async def registered(self, driver: ExecutorDriver) -> None:
        """Connected to the slave; tasks will follow."""

    async def launch_task(self, driver: ExecutorDriver, task: TaskInfo) -> None:
        """Run `task`. Return quickly: start long work with `driver.spawn`."""

    async def kill_task(self, driver: ExecutorDriver, task_id: str) -> None:
        """Stop a task and report TASK_KILLED for it, within `driver.kill_grace(task_id)`
        seconds of asking it to stop: its framework's kill, its slave's, or its failing
        health check's."""

    async def framework_message(self, driver: ExecutorDriver, data: bytes) -> None:
        """Opaque data from the scheduler."""

    async def shutdown(self, driver: ExecutorDriver) -> None:
        """The framework is going away: stop everything (the driver stops after this)."""

    async def error(self, driver: ExecutorDriver, message: str) -> None:
        """The slave refused something this executor sent."""


PYMESOS_NAMES = {
    "launchTask": "launch_task",
    "killTask": "kill_task",
    "frameworkMessage": "framework_message",
}
"""pymesos's executor callbacks by our names: an executor written as for pymesos defines
the first."""


def callbacks_problem(executor: Executor) -> str | None:
    """Why the driver could not call `executor`'s callbacks, or None: one written `def`,
    or one named as pymesos names it (`launchTask`) where ours (`launch_task`) is not
    (`frameworks.callbacks`)."""
    return callbacks.problem(
        executor,
        Executor,
        PYMESOS_NAMES,
        "a pymesos executor runs as it is under frameworks.mesos_executor, "
        "docs/reference/mesos-api.md",
    )


class ExecutorDriver:
    def __init__(
        self,
        executor: Executor,
        *,
        channel_fd: int | None = None,
        slave_id: str | None = None,
        framework_id: str | None = None,
        executor_id: str | None = None,
        token: str | None = None,
    ) -> None:
        """Raises `DriverError` at once for an executor whose callbacks it could not call
        (one written `def`, or named as pymesos names it: `launchTask`)."""
        if (problem := callbacks_problem(executor)) is not None:
            raise DriverError(problem)
        env = os.environ
        self.executor = executor
        self.channel_fd = channel_fd if channel_fd is not None else int(env["DRFMESOS_EXECUTOR_FD"])
        self.slave_id = slave_id or env["DRFMESOS_SLAVE_ID"]
        self.framework_id = framework_id or env["DRFMESOS_FRAMEWORK_ID"]
        self.executor_id = executor_id or env["DRFMESOS_EXECUTOR_ID"]
        self.token = token if token is not None else env.get(TOKEN_VARIABLE, "")
        self.log = logs.get(
            "executor",
            executor_id=self.executor_id,
            framework_id=self.framework_id,
            slave_id=self.slave_id,
        )
        self.channel: Channel | None = None
        self._registered = asyncio.Event()
        self._stopped = asyncio.Event()
        self._spawned: set[asyncio.Task[Any]] = set()
        self._sandboxes: dict[str, Path] = {}  # task id -> the sandbox the slave made for it
        self._graces: dict[str, float] = {}  # task id -> its kill's grace, as the slave says
        self._health = ExecutorHealth(
            self.framework_id, self.log,
            send=self.send_status_update, sandbox=self.sandbox,
            kill=lambda task_id: self.spawn(self._kill(task_id)),
        )  # fmt: skip
        self._checks: dict[str, asyncio.Future[ExecutorTokenChecked]] = {}  # by request id
        self._routes: dict[type[Wire], Callable[[Any], Awaitable[None]]] = {
            ExecutorRegistered: self._on_registered,
            RunTask: self._on_run_task,
            KillTask: self._on_kill_task,
            FrameworkMessage: self._on_message,
            ShutdownExecutor: self._on_shutdown,
            ShutdownFramework: self._on_shutdown,
            Error: self._on_error,
            ExecutorTokenChecked: self._on_token_checked,
        }

    async def run(self) -> None:
        """Register with the slave over the line it gave us, and serve until shut down,
        `stop()`, or the slave goes away."""
        channel = await Channel.from_fd(self.channel_fd)
        self.channel = channel
        reader = asyncio.create_task(self._read(channel))
        register = asyncio.create_task(self._register(channel))
        try:
            await self._stopped.wait()
        finally:
            await cancel_and_wait(register)
            await cancel_and_wait(reader)
            await self._health.close()
            for task in list(self._spawned):
                await cancel_and_wait(task)
            await channel.drain()
            await channel.close()
            self.channel = None

    async def _read(self, channel: Channel) -> None:
        try:
            while True:
                item = await channel.receive()
                if isinstance(item, DecodeError):
                    self.log.warning("executor.bad_message", reason=item.reason, detail=item.detail)
                    continue
                route = self._routes.get(type(item.message))
                if route is None:
                    self.log.warning("executor.unexpected_type", type=item.message.TYPE)
                    continue
                try:
                    await route(item.message)
                except Exception:
                    self.log.exception("executor.handler_failed", type=item.message.TYPE)
        except ChannelClosed:
            self.log.warning("executor.slave_gone")
        finally:
            self._stopped.set()

    async def _register(self, channel: Channel) -> None:
        delay = 0.5
        while not self._registered.is_set():
            channel.send(
                RegisterExecutor(
                    slave_id=self.slave_id,
                    framework_id=self.framework_id,
                    executor_id=self.executor_id,
                    token=self.token,
                )
            )
            with contextlib.suppress(TimeoutError):
                await within(self._registered.wait(), delay)
            delay = min(delay * 2, 5.0)

    @made_at_once
    def stop(self) -> None:
        """Stop: `run()` returns (awaitable, as every driver call is)."""
        self._stopped.set()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run work in the background; it is cancelled when the driver stops."""
        task = asyncio.create_task(self._guard(coro))
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)
        return task

    async def _guard(self, coro: Coroutine[Any, Any, Any]) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception:
            self.log.exception("executor.task_failed")

    # -- what an executor says ---------------------------------------------------------------
    def send_status_update(self, status: TaskStatus) -> Made:
        """Report a task's state to the slave (which owns getting it to the scheduler): sent
        when called; awaiting it waits until the line to the slave has taken it."""
        channel = self._channel()
        status = self._health.seen(status)
        if status.state.terminal:
            self._graces.pop(status.task_id, None)
        status = status.model_copy(
            update={"slave_id": self.slave_id, "executor_id": self.executor_id}
        )
        channel.send(
            StatusUpdate(framework_id=self.framework_id, slave_id=self.slave_id, status=status)
        )
        return Made(channel.drain)

    def send_framework_message(self, data: bytes) -> Made:
        """Opaque data to this executor's scheduler: sent when called, as above."""
        channel = self._channel()
        channel.send(
            FrameworkMessage(
                framework_id=self.framework_id,
                slave_id=self.slave_id,
                executor_id=self.executor_id,
                data=data,
            )
        )
        return Made(channel.drain)

    async def token_holder(self, token: str, timeout: float = 5.0) -> tuple[str, str] | None:
        """(framework id, executor id) of the executor the slave issued `token` to; None
        if it issued it to none (only the slave holds the key that signs them)."""
        channel = self._channel()
        request_id = new_id()
        answer = self._checks[request_id] = asyncio.get_running_loop().create_future()
        try:
            channel.send(CheckExecutorToken(request_id=request_id, token=token))
            checked = await within(answer, timeout)
        finally:
            self._checks.pop(request_id, None)
        if not checked.framework_id or not checked.executor_id:
            return None
        return checked.framework_id, checked.executor_id

    def kill_grace(self, task_id: str) -> float | None:
        """Seconds a kill of this task gives it between asking it to stop and making it
        (SIGTERM, then SIGKILL): the kill's own, else its task's kill policy, as its slave
        holds them, else its slave's default. None: the slave did not say."""
        return self._graces.get(task_id)

    def sandbox(self, task_id: str) -> Path:
        """The directory the slave made for this task's own files (the executor's own
        sandbox, where it runs, for a task the slave did not make one for)."""
        return self._sandboxes.get(task_id) or Path.cwd()

    async def output(
        self, task_id: str, text: str, stream: Literal["stdout", "stderr"] = "stdout"
    ) -> None:
        """Append `text` to the task's own stdout (or stderr): what reading that task's
        files shows. (Written in a thread: the loop does not wait on the disk.)"""
        path = self.sandbox(task_id) / stream

        def append() -> None:
            with path.open("a", encoding="utf-8") as f:
                f.write(text)

        await asyncio.to_thread(append)

    def _channel(self) -> Channel:
        if self.channel is None:
            raise RuntimeError("the executor driver is not running")
        return self.channel

    # -- what arrives --------------------------------------------------------------------------
    async def _on_registered(self, msg: ExecutorRegistered) -> None:
        if not self._registered.is_set():
            self._registered.set()
            await self.executor.registered(self)

    async def _on_run_task(self, msg: RunTask) -> None:
        if msg.sandbox:
            self._sandboxes[msg.task.task_id] = Path(msg.sandbox)
        if msg.kill_grace is not None:
            self._graces[msg.task.task_id] = msg.kill_grace
        self._health.launched(msg.task, msg.killing)
        await self.executor.launch_task(self, msg.task)

    async def _on_kill_task(self, msg: KillTask) -> None:
        if msg.kill_policy is not None:  # (the kill's own grace, over its task's)
            self._graces[msg.task_id] = msg.kill_policy.grace_period
        await self._kill(msg.task_id)

    async def _kill(self, task_id: str) -> None:
        """A kill begins: no more health updates; the executor's own kill."""
        self._health.kill_begins(task_id)
        await self.executor.kill_task(self, task_id)

    async def _on_message(self, msg: FrameworkMessage) -> None:
        await self.executor.framework_message(self, msg.data)

    async def _on_shutdown(self, msg: ShutdownExecutor | ShutdownFramework) -> None:
        try:
            await self.executor.shutdown(self)
        finally:
            self.stop()

    async def _on_token_checked(self, msg: ExecutorTokenChecked) -> None:
        answer = self._checks.get(msg.request_id)
        if answer is not None and not answer.done():
            answer.set_result(msg)

    async def _on_error(self, msg: Error) -> None:
        await self.executor.error(self, msg.message)
