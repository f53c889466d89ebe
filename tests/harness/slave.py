"""A slave process against a master in process: the rig the slave, isolation and image tests
run tasks on."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from master.master import Master, MasterConfig
from protocol.tooling.brokers import MosquittoBroker
from protocol.transport.aio import within
from protocol.transport.bus import Bus
from protocol.wire.messages import (
    CommandInfo,
    ContainerInfo,
    ExecutorInfo,
    FrameworkCapability,
    TaskInfo,
)
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics
from slave.slave import Slave, SlaveConfig

from harness.fakes import FakeFramework
from harness.helpers import eventually, kill_processes_under, need_root

T = Topics("stest")


class Rig:
    """A master, slaves and a framework on one broker, all in this process."""

    def __init__(self, broker: MosquittoBroker, tmp: Path, stack: contextlib.AsyncExitStack):
        self.broker, self.tmp, self.stack = broker, tmp, stack
        self.master: Master
        self._used: dict[str, int] = {}  # offers each framework has used up

    async def start_master(self) -> Master:
        bus = await self.stack.enter_async_context(
            Bus(
                self.broker.url,
                name="master",
                client_id="stest-master",
                persistent=True,
            )
        )
        self.master = Master(bus, T, FAST)
        await self.master.start()
        self.stack.push_async_callback(self.master.stop)
        return self.master

    async def start_slave(self, slave_id: str, resources: Resources, **kw: object) -> Slave:
        bus = await self.stack.enter_async_context(
            Bus(
                self.broker.url,
                name=slave_id,
                client_id=f"stest-{slave_id}",
                inbox=T.slave("slave", slave_id),
                persistent=True,
                will=(T.gone("slave", "slave"), "slave", "slave"),
            )
        )
        config = SlaveConfig(
            slave_id=slave_id,
            hostname=f"{slave_id}.local",
            resources=resources,
            work_dir=self.tmp / slave_id,
            cluster=T.cluster,
            **{"kill_grace": 1.0, "memory_check_interval": 0.1, **kw},  # type: ignore[arg-type]
        )
        slave = Slave(bus, T, config)
        await slave.start()
        self.stack.push_async_callback(slave.stop, kill_tasks=True)
        await slave.registered.wait()
        return slave

    async def framework(
        self,
        name: str = "fw",
        *,
        acknowledging: bool = True,
        capabilities: Sequence[FrameworkCapability] = (),
    ) -> FakeFramework:
        bus = await self.stack.enter_async_context(
            Bus(self.broker.url, name=name, inbox=T.framework("framework", name))
        )
        fw = FakeFramework(bus, T, name, acknowledging=acknowledging)
        await bus.subscribe(T.framework("framework", name), fw.receive)
        await fw.subscribe(name, failover_timeout=60, capabilities=list(capabilities))
        return fw

    async def launch(
        self,
        fw: FakeFramework,
        command: str,
        task_id: str,
        resources: Resources | None = None,
        image: str | None = None,
        **fields: Any,
    ) -> Path:
        """Launch a command task on `fw`'s next offer (`fields`: more of its TaskInfo);
        its sandbox."""
        offer = await fw.next_offer(after=self.offers_used(fw))
        self._used[fw.inbox_id] = self.offers_used(fw) + 1
        task = TaskInfo(
            task_id=task_id,
            slave_id=offer.slave_id,
            resources=resources or Resources(cpus=0.1, mem=64),
            command=CommandInfo(value=command),
            container=ContainerInfo(image=image) if image is not None else None,
            **fields,
        )
        await fw.accept(offer, [task], refuse=0)
        return self.tmp / offer.slave_id / "sandboxes" / fw.framework_id / task_id

    async def decline_next(self, fw: FakeFramework, refuse: float) -> None:
        """Decline `fw`'s next offer (for `refuse` seconds): its slave goes to another."""
        offer = await fw.next_offer(after=self.offers_used(fw))
        self._used[fw.inbox_id] = self.offers_used(fw) + 1
        await fw.decline(offer, refuse=refuse)

    def offers_used(self, fw: FakeFramework) -> int:
        return self._used.get(fw.inbox_id, 0)


@contextlib.asynccontextmanager
async def master_rig(broker: MosquittoBroker, tmp: Path) -> AsyncIterator[Rig]:
    """A rig with its master started; all it started stops at the end."""
    async with contextlib.AsyncExitStack() as stack:
        r = Rig(broker, tmp, stack)
        await r.start_master()
        yield r


@pytest.fixture
async def rig(mosquitto: MosquittoBroker, tmp_path: Path) -> AsyncIterator[Rig]:
    """The master_rig of a test on mosquitto (a test module takes it as a fixture with
    `from harness.slave import rig as rig`)."""
    async with master_rig(mosquitto, tmp_path) as r:
        yield r


async def slave_process(
    broker: MosquittoBroker, work: Path, *extra: str, stderr: int | None = None
) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cluster.cli",
        "slave",
        "--broker",
        broker.url.url,
        "--cluster",
        T.cluster,
        "--work-dir",
        str(work),
        "--resources",
        "cpus:2;mem:512",
        "--log-level",
        "warning",
        *extra,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        stderr=stderr,
    )


async def reap(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.terminate()
        try:
            await within(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()


@dataclasses.dataclass
class RootWork:
    """A rig's master, and a work dir for a root slave process under /var/lib (where others
    pass: its tasks get a /tmp of their own, which under the host's /tmp they do not)."""

    rig: Rig
    work: Path
    task_uids: Path  # (its principals' uids, in a map of its own)

    async def start_slave(self, *flags: str) -> asyncio.subprocess.Process:
        proc = await slave_process(
            self.rig.broker, self.work, *flags, "--task-uid-map", str(self.task_uids)
        )
        self.rig.stack.push_async_callback(reap, proc)
        return proc


@contextlib.asynccontextmanager
async def root_work(
    mosquitto: MosquittoBroker, tmp_path: Path, prefix: str
) -> AsyncIterator[RootWork]:
    """`RootWork` (root needed, else the test is skipped); at its end every process left
    under the work dir is killed and the dir removed."""
    need_root()
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/var/lib"))
    os.chmod(base, 0o711)
    work = base / "slave"
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(shutil.rmtree, base, ignore_errors=True)
        stack.callback(kill_processes_under, work)  # (then what the slave left)
        rig = Rig(mosquitto, tmp_path, stack)
        await rig.start_master()
        yield RootWork(rig, work, base / "task-uids.json")


class SlaveProcess:
    """One slave process on a work dir, against a rig's master (slave_timeout 300 s: a
    slave restarted on a loaded machine may take longer than the rig's 15 s), that a
    test SIGKILLs and starts again on the same work dir; its tasks outlive it."""

    def __init__(self, rig: Rig, work: Path) -> None:
        self.rig, self.work = rig, work
        self.proc: asyncio.subprocess.Process

    async def start(self) -> None:
        self.proc = await slave_process(self.rig.broker, self.work)
        self.rig.stack.push_async_callback(reap, self.proc)

    async def crash(self) -> None:
        """SIGKILL it (a crash, or an upgrade), its tasks left running."""
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()


@contextlib.asynccontextmanager
async def restartable_slave(broker: MosquittoBroker, tmp: Path) -> AsyncIterator[SlaveProcess]:
    """A rig with its master started and one slave process (`SlaveProcess`) on
    `tmp`/slave; its tasks' processes are killed last."""
    work = tmp / "slave"
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(kill_processes_under, work)  # (last: the tasks outlive their slave)
        rig = Rig(broker, tmp, stack)
        master = await rig.start_master()
        master.config = dataclasses.replace(master.config, slave_timeout=300)
        slave = SlaveProcess(rig, work)
        yield slave


EXECUTOR = f"{sys.executable} -m frameworks.samples.sleep_executor"


FAST = MasterConfig(allocation_interval=0.05, heartbeat_interval=0.5, status_retry=0.3)


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) members of a process group."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[2] == str(pgid) and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def port_server() -> str:
    """A task's command that serves HTTP on its first port (`$PORT0`, as the slave gives
    it), answering each GET with the port it listens on."""
    program = (
        "import http.server, os\n"
        "port = int(os.environ['PORT0'])\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(200)\n"
        "        self.end_headers()\n"
        "        self.wfile.write(os.environ['PORTS'].encode())\n"
        "    def log_message(self, *a): pass\n"
        "http.server.HTTPServer(('127.0.0.1', port), H).serve_forever()\n"
    )
    return f'/usr/bin/python3 -c "{program}"'


def http_server(port: int) -> str:
    """A task's command that serves HTTP on `port` (the host's python3, which a task's
    user may run): 200, or 500 once `sick` is in its sandbox."""
    program = (
        "import http.server, os\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(500 if os.path.exists('sick') else 200)\n"
        "        self.end_headers()\n"
        "    def log_message(self, *a): pass\n"
        f"http.server.HTTPServer(('127.0.0.1', {port}), H).serve_forever()\n"
    )
    return f'/usr/bin/python3 -c "{program}"'


STUBBORN = "trap '' TERM; while :; do sleep 0.05; done"  # never registers, ignores SIGTERM


async def stubborn_executor(
    rig: Rig, kill_grace: float
) -> tuple[FakeFramework, Slave, Any, asyncio.subprocess.Process]:
    """Framework mallory's custom executor, STUBBORN, running one task on a slave s1 of
    `kill_grace`: mallory, the slave, the executor and its process (spawned)."""
    mallory = await rig.framework("mallory")
    slave = await rig.start_slave("s1", Resources(cpus=4, mem=2048), kill_grace=kill_grace)
    offer = await mallory.next_offer()
    task = TaskInfo(
        task_id="m0",
        slave_id="s1",
        resources=Resources(cpus=0.1, mem=16),
        executor=ExecutorInfo(
            executor_id="e0",
            command=CommandInfo(value=STUBBORN),
            resources=Resources(cpus=0.01, mem=8),
        ),
    )
    await mallory.accept(offer, [task], refuse=0)
    await eventually(lambda: len(slave.executors) == 1)
    (executor,) = slave.executors.values()
    await eventually(lambda: executor.pid is not None)  # (spawned)
    proc = executor._proc
    assert proc is not None
    return mallory, slave, executor, proc
