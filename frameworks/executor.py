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

The slave starts the program with its coordinates in the environment (`DRFMESOS_BROKER`,
`DRFMESOS_CLUSTER`, `DRFMESOS_SLAVE_ID`, `DRFMESOS_FRAMEWORK_ID`, `DRFMESOS_EXECUTOR_ID`);
the driver reads them, registers with the slave, and calls the executor's callbacks. Status
updates go to the slave, which keeps them until the master has them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Coroutine
from typing import Any

from protocol import logs
from protocol.bus import Bus, Dispatcher, cancel_and_wait
from protocol.messages import (
    Error,
    ExecutorRegistered,
    FrameworkMessage,
    KillTask,
    RegisterExecutor,
    RunTask,
    ShutdownExecutor,
    ShutdownFramework,
    StatusUpdate,
    TaskInfo,
    TaskStatus,
)
from protocol.topics import Topics


class Executor:
    """Override what you need; every callback is a no-op by default."""

    async def registered(self, driver: ExecutorDriver) -> None:
        """Connected to the slave; tasks will follow."""

    async def launch_task(self, driver: ExecutorDriver, task: TaskInfo) -> None:
        """Run `task`. Return quickly: start long work with `driver.spawn`."""

    async def kill_task(self, driver: ExecutorDriver, task_id: str) -> None:
        """Stop a task and report TASK_KILLED for it."""

    async def framework_message(self, driver: ExecutorDriver, data: bytes) -> None:
        """Opaque data from the scheduler."""

    async def shutdown(self, driver: ExecutorDriver) -> None:
        """The framework is going away: stop everything (the driver stops after this)."""

    async def error(self, driver: ExecutorDriver, message: str) -> None:
        """The slave refused something this executor sent."""


class ExecutorDriver:
    def __init__(
        self,
        executor: Executor,
        *,
        broker: str | None = None,
        cluster: str | None = None,
        slave_id: str | None = None,
        framework_id: str | None = None,
        executor_id: str | None = None,
    ) -> None:
        env = os.environ
        self.executor = executor
        self.broker = broker or env.get("DRFMESOS_BROKER", "mqtt://127.0.0.1:1883")
        self.topics = Topics(cluster or env.get("DRFMESOS_CLUSTER", "default"))
        self.slave_id = slave_id or env["DRFMESOS_SLAVE_ID"]
        self.framework_id = framework_id or env["DRFMESOS_FRAMEWORK_ID"]
        self.executor_id = executor_id or env["DRFMESOS_EXECUTOR_ID"]
        self.key = f"{self.framework_id}.{self.executor_id}"
        logs.configure_default()
        self.log = logs.get(
            "executor",
            executor_id=self.executor_id,
            framework_id=self.framework_id,
            slave_id=self.slave_id,
        )
        self.bus: Bus | None = None
        self._registered = asyncio.Event()
        self._stopped = asyncio.Event()
        self._spawned: set[asyncio.Task[Any]] = set()

    @property
    def inbox(self) -> str:
        return self.topics.executor(self.slave_id, self.key)

    async def run(self) -> None:
        """Connect, register with the slave, and serve until shut down or `stop()`."""
        async with Bus(self.broker, name=f"executor-{self.executor_id}", inbox=self.inbox) as bus:
            self.bus = bus
            d = Dispatcher(bus, "executor")
            d.on(ExecutorRegistered, self._on_registered)
            d.on(RunTask, self._on_run_task)
            d.on(KillTask, self._on_kill_task)
            d.on(FrameworkMessage, self._on_message)
            d.on(ShutdownExecutor, self._on_shutdown)
            d.on(ShutdownFramework, self._on_shutdown)
            d.on(Error, self._on_error)
            await bus.subscribe(self.inbox, d)
            register = asyncio.create_task(self._register(bus))
            try:
                await self._stopped.wait()
            finally:
                await cancel_and_wait(register)
                for task in list(self._spawned):
                    await cancel_and_wait(task)
            self.bus = None

    async def _register(self, bus: Bus) -> None:
        delay = 0.5
        while not self._registered.is_set():
            await bus.publish(
                self.topics.slave(self.slave_id),
                RegisterExecutor(
                    slave_id=self.slave_id,
                    framework_id=self.framework_id,
                    executor_id=self.executor_id,
                    incarnation=bus.incarnation,
                ),
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._registered.wait(), delay)
            delay = min(delay * 2, 5.0)

    def stop(self) -> None:
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
    async def send_status_update(self, status: TaskStatus) -> None:
        """Report a task's state to the slave (which owns getting it to the scheduler)."""
        bus = self._bus()
        status = status.model_copy(
            update={"slave_id": self.slave_id, "executor_id": self.executor_id}
        )
        await bus.publish(
            self.topics.slave(self.slave_id),
            StatusUpdate(framework_id=self.framework_id, slave_id=self.slave_id, status=status),
        )

    async def send_framework_message(self, data: bytes) -> None:
        await self._bus().publish(
            self.topics.slave(self.slave_id),
            FrameworkMessage(
                framework_id=self.framework_id,
                slave_id=self.slave_id,
                executor_id=self.executor_id,
                data=data,
            ),
        )

    def _bus(self) -> Bus:
        if self.bus is None:
            raise RuntimeError("the executor driver is not running")
        return self.bus

    # -- what arrives --------------------------------------------------------------------------
    async def _on_registered(self, msg: ExecutorRegistered, reply_to: str | None) -> None:
        if not self._registered.is_set():
            self._registered.set()
            await self.executor.registered(self)

    async def _on_run_task(self, msg: RunTask, reply_to: str | None) -> None:
        await self.executor.launch_task(self, msg.task)

    async def _on_kill_task(self, msg: KillTask, reply_to: str | None) -> None:
        await self.executor.kill_task(self, msg.task_id)

    async def _on_message(self, msg: FrameworkMessage, reply_to: str | None) -> None:
        await self.executor.framework_message(self, msg.data)

    async def _on_shutdown(self, msg: ShutdownExecutor | ShutdownFramework, _r: str | None) -> None:
        try:
            await self.executor.shutdown(self)
        finally:
            self.stop()

    async def _on_error(self, msg: Error, reply_to: str | None) -> None:
        await self.executor.error(self, msg.message)
