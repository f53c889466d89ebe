"""A real slave two tenants share, as root that switches users, with PID namespaces and
cgroups, told what to run as a master would tell them (each launch names its framework's
principal): the rig of the tenant isolation tests and of the tests that check a task runs
as its user in its namespaces (a COMMAND health check's)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from protocol.transport.base import Transport
from protocol.transport.memory import MemoryBroker
from protocol.wire.messages import (
    CommandInfo,
    ExecutorInfo,
    FrameworkMessage,
    Register,
    Registered,
    Reregister,
    RunTasks,
    StatusAck,
    StatusUpdate,
    StatusUpdates,
    TaskInfo,
    TaskState,
    TaskStatus,
    Wire,
)
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics
from slave.slave import Slave, SlaveConfig

from harness.helpers import need_root, open_transport

T = Topics("tenants-slave")


@dataclass
class Master:
    """What a master does for these tests: answers registrations, acknowledges updates,
    and keeps every status and re-registration."""

    bus: Transport
    slave_id: str
    statuses: list[tuple[str, TaskStatus]] = field(default_factory=list)
    reregistered: list[Reregister] = field(default_factory=list)
    messages: list[FrameworkMessage] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def receive(self, message: Wire, reply_to: str | None) -> None:
        if isinstance(message, Register | Reregister):
            if isinstance(message, Reregister):
                self.reregistered.append(message)
            registered = Registered(slave_id=message.slave_id, heartbeat_interval_seconds=5)
            await self.bus.publish(T.slave("slave", message.slave_id), registered)
        if isinstance(message, FrameworkMessage):
            self.messages.append(message)
        updates = message.items if isinstance(message, StatusUpdates) else [message]
        for update in updates:
            if isinstance(update, StatusUpdate):
                self.statuses.append((update.framework_id, update.status))
                ack = StatusAck(
                    slave_id=update.slave_id,
                    framework_id=update.framework_id,
                    task_id=update.status.task_id,
                    uuid=update.status.uuid,
                )
                await self.bus.publish(T.slave("slave", update.slave_id), ack)
        self.changed.set()

    async def run(
        self,
        principal: str,
        framework_id: str,
        task_id: str,
        command: str,
        *,
        executor: ExecutorInfo | None = None,
        env: dict[str, str] | None = None,
        resources: Resources | None = None,
    ) -> None:
        """A task of `principal`'s (0.1 cpus and 64 MB unless `resources` says)."""
        task = TaskInfo(
            task_id=task_id,
            slave_id=self.slave_id,
            resources=resources or Resources(cpus=0.1, mem=64),
            command=None if executor else CommandInfo(value=command, environment=env or {}),
            executor=executor,
            data=command.encode() if executor else b"",
        )
        await self.launch(principal, framework_id, task)

    async def launch(self, principal: str, framework_id: str, task: TaskInfo) -> None:
        """`task`, as built, of `principal`'s (its ports, its own executor, ...)."""
        launch = RunTasks(framework_id=framework_id, tasks=[task], principal=principal)
        await self.bus.publish(T.slave("slave", self.slave_id), launch)

    def states(self, framework_id: str, task_id: str) -> list[TaskState]:
        return [s.state for f, s in self.statuses if (f, s.task_id) == (framework_id, task_id)]

    def ended_after(self, framework_id: str, task_id: str, before: int) -> bool:
        """The task (launched again) ended: an end among its states after its first
        `before`."""
        return any(state.terminal for state in self.states(framework_id, task_id)[before:])

    async def reaches(
        self, framework_id: str, task_id: str, state: TaskState, timeout: float = 20
    ) -> TaskStatus:
        async with asyncio.timeout(timeout):
            while True:
                for f, s in self.statuses:
                    if (f, s.task_id, s.state) == (framework_id, task_id, state):
                        return s
                self.changed.clear()
                await self.changed.wait()

    async def ends(self, framework_id: str, task_id: str, timeout: float = 30) -> TaskStatus:
        async with asyncio.timeout(timeout):
            while True:
                for f, s in self.statuses:
                    if (f, s.task_id) == (framework_id, task_id) and s.state.terminal:
                        return s
                self.changed.clear()
                await self.changed.wait()


@dataclass
class Shared:
    """A slave alice and mallory share, and the master's side of it."""

    slave: Slave
    master: Master
    work: Path
    broker: MemoryBroker
    stack: contextlib.AsyncExitStack
    bus: Transport | None = None

    async def start(self, config: SlaveConfig) -> None:
        """Start a slave of `config` (as a process would: a connection of its own)."""
        self.bus = await open_transport(
            self.stack, self.broker.connector(None), config.slave_id, T.outbox("slave", "slave")
        )
        self.slave = Slave(self.bus, T, config)
        await self.slave.start()
        self.stack.push_async_callback(self.slave.stop, kill_tasks=True)
        await self.slave.registered.wait()

    async def restart(self) -> None:
        """The slave stops (its tasks run on) and starts again on its work dir."""
        assert self.bus is not None
        await self.slave.stop()
        await self.bus.close()
        await self.start(self.slave.config)

    def sandbox(self, framework_id: str, task_id: str) -> Path:
        return self.work / "sandboxes" / framework_id / task_id

    def output(self, framework_id: str, task_id: str) -> str:
        return (self.sandbox(framework_id, task_id) / "stdout").read_text()

    def output_so_far(self, framework_id: str, task_id: str) -> str:
        """Its stdout, or nothing while there is none to read."""
        with contextlib.suppress(OSError):
            return self.output(framework_id, task_id)
        return ""


@contextlib.asynccontextmanager
async def shared_slave(
    *, base_in: str | None = None, resources: Resources | None = None, **config: object
) -> AsyncIterator[Shared]:
    """A real slave as root that switches users, with PID namespaces and cgroups (where
    mounted), its work dir where any user may pass (as an operator would put it), its
    uid map its own. Its work dir is under /tmp unless `base_in` says where (a slave
    whose work dir is under /tmp gives its tasks no /tmp of their own); `resources` its
    --resources (cpus:4;mem:2048)."""
    need_root()
    base = Path(tempfile.mkdtemp(prefix="drfmesos-tenants-", dir=base_in))
    os.chmod(base, 0o711)  # (as /var/lib is: others pass)
    broker = MemoryBroker()
    try:
        async with contextlib.AsyncExitStack() as stack:
            master_bus = await open_transport(stack, broker.connector(None), "master")
            slave_id = f"shared-{os.getpid()}-{id(base) % 10_000}"
            master = Master(master_bus, slave_id)
            await master_bus.subscribe(T.inbound("slave", "slave"), master.receive)
            settings: dict[str, object] = {
                "isolation": "auto",
                "switch_user": True,
                "pid_namespace": True,
                "task_uid_map": base / "task-uids.json",
                "kill_grace": 1.0,
                **config,
            }
            # (what a slave before #45 lacks is left out: there each attack succeeds)
            known = {f.name for f in dataclasses.fields(SlaveConfig)}
            settings = {k: v for k, v in settings.items() if k in known}
            shared = Shared(None, master, base / "work", broker, stack)  # type: ignore[arg-type]
            await shared.start(
                SlaveConfig(
                    slave_id,
                    slave_id,
                    resources or Resources(cpus=4, mem=2048),
                    base / "work",
                    cluster=T.cluster,
                    **settings,  # type: ignore[arg-type]
                )
            )
            yield shared
    finally:
        with contextlib.suppress(ImportError):  # (a slave before #45 has none)
            from slave.task_users import UidMap

            UidMap._open.pop(base / "task-uids.json", None)
        await asyncio.to_thread(shutil.rmtree, base, True)


ALICE, MALLORY = "fw-alice-0001", "fw-mallory-0001"
