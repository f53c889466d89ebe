"""A hostile tenant's tasks on a slave it shares with a victim reach nothing of the
victim's, nor the slave's (#45): real slaves as root with task users, PID namespaces and
cgroups, real processes under real uids, told what to run as a master would tell them
(each launch names its framework's principal, `RunTasks.principal`).

`mallory`'s command tasks try every read, signal and impersonation a task could: alice's
environment through /proc, her sandbox, the slave's secret file (from the environment and
from /proc/*/cmdline), its work dir and journals, `kill -0` and `kill` on her processes,
her executor's HTTP API without a token and with mallory's own, and framework ids that
would have named alice's executor or cgroup. Each attempt prints what it got; the tests
read mallory's stdout, as mallory could.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from protocol.transport.base import Transport
from protocol.transport.memory import MemoryBroker
from protocol.wire.messages import (
    CommandInfo,
    ExecutorInfo,
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
from slave.task_users import UidMap

from helpers import eventually, open_transport

T = Topics("tenants-slave")
SECRET = "alice-secret-7f3a"  # in alice's task environment and her sandbox's stdout


def need_root() -> None:
    """These run tasks as other users: root, with util-linux's unshare and setpriv. In CI
    their absence is a failure, elsewhere a skip."""
    why = None
    if os.geteuid() != 0:
        why = "not root"
    elif not (shutil.which("unshare") and shutil.which("setpriv")):
        why = "no unshare or setpriv"
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"tenant isolation tests need root and util-linux in CI: {why}")
        pytest.skip(why)


@dataclass
class Master:
    """What a master does for these tests: answers registrations, acknowledges updates,
    and keeps every status and re-registration."""

    bus: Transport
    slave_id: str
    statuses: list[tuple[str, TaskStatus]] = field(default_factory=list)
    reregistered: list[Reregister] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def receive(self, message: Wire, reply_to: str | None) -> None:
        if isinstance(message, Register | Reregister):
            if isinstance(message, Reregister):
                self.reregistered.append(message)
            registered = Registered(slave_id=message.slave_id, heartbeat_interval_seconds=5)
            await self.bus.publish(T.slave("slave", message.slave_id), registered)
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
    ) -> None:
        task = TaskInfo(
            task_id=task_id,
            slave_id=self.slave_id,
            resources=Resources(cpus=0.1, mem=64),
            command=None if executor else CommandInfo(value=command, environment=env or {}),
            executor=executor,
            data=command.encode() if executor else b"",
        )
        launch = RunTasks(framework_id=framework_id, tasks=[task], principal=principal)
        await self.bus.publish(T.slave("slave", self.slave_id), launch)

    def states(self, framework_id: str, task_id: str) -> list[TaskState]:
        return [s.state for f, s in self.statuses if (f, s.task_id) == (framework_id, task_id)]

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

    def sandbox(self, framework_id: str, task_id: str) -> Path:
        return self.work / "sandboxes" / framework_id / task_id

    def output(self, framework_id: str, task_id: str) -> str:
        return (self.sandbox(framework_id, task_id) / "stdout").read_text()


@contextlib.asynccontextmanager
async def shared_slave(**config: object) -> AsyncIterator[Shared]:
    """A real slave as root that switches users, with PID namespaces and cgroups (where
    mounted), its work dir where any user may pass (as an operator would put it), its
    uid map its own."""
    need_root()
    base = Path(tempfile.mkdtemp(prefix="drfmesos-tenants-"))
    os.chmod(base, 0o711)  # (as /var/lib is: others pass)
    broker = MemoryBroker()
    try:
        async with contextlib.AsyncExitStack() as stack:
            master_bus = await open_transport(stack, broker.connector(None), "master")
            slave_id = f"shared-{os.getpid()}-{id(base) % 10_000}"
            master = Master(master_bus, slave_id)
            await master_bus.subscribe(T.inbound("slave", "slave"), master.receive)
            bus = await open_transport(
                stack, broker.connector(None), slave_id, inbox=T.outbox("slave", "slave")
            )
            settings: dict[str, object] = {
                "isolation": "auto",
                "switch_user": True,
                "pid_namespace": True,
                "task_uid_map": base / "task-uids.json",
                "kill_grace": 1.0,
                **config,
            }
            slave = Slave(
                bus,
                T,
                SlaveConfig(
                    slave_id,
                    slave_id,
                    Resources(cpus=4, mem=2048),
                    base / "work",
                    cluster=T.cluster,
                    **settings,  # type: ignore[arg-type]
                ),
            )
            await slave.start()
            stack.push_async_callback(slave.stop, kill_tasks=True)
            await slave.registered.wait()
            yield Shared(slave, master, base / "work")
    finally:
        UidMap._open.pop(base / "task-uids.json", None)
        await asyncio.to_thread(shutil.rmtree, base, True)


ALICE, MALLORY = "fw-alice-0001", "fw-mallory-0001"


async def test_each_principals_tasks_run_as_a_user_of_its_own_in_a_pid_namespace() -> None:
    async with shared_slave() as s:
        report = "id -u; id -g; echo $$; ls /proc | grep -c '^[0-9]'; stat -c %a:%u ."
        await s.master.run("alice", ALICE, "a1", report)
        await s.master.run("mallory", MALLORY, "m1", report)
        await s.master.ends(ALICE, "a1")
        await s.master.ends(MALLORY, "m1")
        alice, mallory = s.output(ALICE, "a1").split(), s.output(MALLORY, "m1").split()
        assert alice[0] != mallory[0]  # a uid each
        assert 0 not in (int(alice[0]), int(mallory[0]))
        assert alice[0] == alice[1]  # its own group
        assert alice[2] != "1"  # (its shell is not the namespace's init: the wrapper is)
        assert int(alice[3]) <= 4  # its /proc shows its own few processes, not the host's
        assert alice[4] == f"700:{alice[0]}"  # its sandbox is its own, closed to others
