"""A highly available cluster on one machine, and what it takes to break it on purpose.

ZooKeeper, mosquitto, several masters (`--zk`), slaves and journaled frameworks (see
`frameworks/samples/journaled.py`), each a real process. `HACluster` knows who leads
(from the retained `Leader` announcement), kills and restarts any part, and reads the
frameworks' journals and witness marks to say afterwards what happened to every task.
The HA tests and `benchmarks/soak.py` are built on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import signal
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from cluster.local.launcher import Launcher, Party
from cluster.testing import reachable
from cluster.testing.zookeeper import ZooKeeperServer
from frameworks.samples.journaled import item_of, work_items
from protocol import logs
from protocol.tooling.brokers import MosquittoBroker
from protocol.tooling.ports import free_port
from protocol.transport.aio import within
from protocol.transport.bus import Bus, Dispatcher
from protocol.wire.messages import Leader, State
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics

log = logs.get("ha")


@dataclass
class Failover:
    """A leader killed (or cut off) at `began`; the next leader announced at `ended`."""

    began: float
    ended: float | None = None
    cause: str = ""

    @property
    def seconds(self) -> float | None:
        return None if self.ended is None else self.ended - self.began


@dataclass
class HAConfig:
    masters: int = 3
    slaves: int = 5
    frameworks: int = 3
    slave_resources: str = "cpus:2;mem:1024"
    task: str = "cpus:0.5;mem:64"
    tasks_each: int = 10  # each framework wants this many at once (more than its share)
    task_duration: str = "1-3"
    zk_session_timeout: float = 3.0
    slave_reregister_timeout: float = 20.0
    failover_timeout: float = 120.0  # the frameworks'
    slave_timeout: float = 20.0
    allocation_interval: float = 0.2
    log_level: str = "info"
    lone: bool = False  # one master with --work-dir instead of several on ZooKeeper
    zk_links: bool = False  # each master reaches ZooKeeper through a link we can cut
    # the masters give ZooKeeper credentials (made afresh, in a file: `--zk file://`), as
    # a shared cluster's do: their nodes are theirs alone (False: open to anyone)
    zk_credentials: bool = True
    work_items: int = 0  # each framework's fixed list of work items (0: endless tasks)
    partition_aware: int = 0  # how many of the frameworks are (the first ones)


@dataclass
class WorkFate:
    """What the journals say about one work item: its tasks, and how many finished."""

    tasks: int = 0
    finished: int = 0
    errors: int = 0  # tasks that ended TASK_ERROR (not retried)


@dataclass
class TaskFate:
    """What a framework's journal says about one task it launched."""

    launched: bool = False
    states: list[str] = field(default_factory=list)
    terminal: set[str] = field(default_factory=set)
    # a new RUNNING update after the task's own terminal update (not a reconciliation
    # answer, which may run ahead of updates still on their way; not a re-sent duplicate)
    running_after_end: bool = False
    ended_by_update: bool = False
    uuids: set[str] = field(default_factory=set)


class HACluster:
    def __init__(self, run_dir: Path, config: HAConfig | None = None, cluster: str = "ha") -> None:
        self.run_dir = run_dir
        self.config = config or HAConfig()
        self.cluster = cluster
        self.topics = Topics(cluster)
        self.zk = ZooKeeperServer()
        self.zk_credentials = f"master:{secrets.token_urlsafe(16)}"  # (`zk_credentials`)
        self.broker = MosquittoBroker()
        self.launcher = Launcher(self.broker.url, cluster, run_dir, self.config.log_level)
        self.parties: dict[str, Party] = {}
        self._commands: dict[str, tuple[str, list[str]]] = {}
        self.http_ports: dict[str, int] = {}
        self.leaders: list[tuple[float, Leader]] = []
        self.leader_changed = asyncio.Event()
        self.state: State | None = None
        self.state_changed = asyncio.Event()
        self.failovers: list[Failover] = []
        self._watch: Bus | None = None
        self.links: dict[str, Link] = {}
        self.witness_dir = run_dir / "witness"  # (made in /tmp at start)

    def _zk_flag(self, name: str, hosts: str) -> str:
        """A master's --zk: with credentials, a file holding its URL (mode 0600)."""
        if not self.config.zk_credentials:
            return f"zk://{hosts}/drfmesos"
        path = self.run_dir / f"{name}.zk"
        path.write_text(f"zk://{self.zk_credentials}@{hosts}/drfmesos")
        path.chmod(0o600)
        return f"file://{path}"

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        await asyncio.to_thread(self._make_run_dir)
        c = self.config
        if not c.lone:
            await self.zk.start()
        await self.broker.start()
        await self._start_watching()
        for i in range(1 if c.lone else c.masters):
            name = f"master{i}"
            port = free_port()
            self.http_ports[name] = port
            if c.lone:
                registry = ["--work-dir", str(self.run_dir / name)]
            else:
                hosts = self.zk.hosts
                if c.zk_links:
                    self.links[name] = link = Link("127.0.0.1", self.zk.port)
                    await link.start()
                    hosts = f"127.0.0.1:{link.port}"
                registry = ["--zk", await asyncio.to_thread(self._zk_flag, name, hosts)]
                registry += [
                    "--zk-session-timeout",
                    str(c.zk_session_timeout),
                ]
            await self._launch(
                "master",
                name,
                [
                    *registry,
                    "--http",
                    f"127.0.0.1:{port}",
                    "--allocation-interval",
                    str(c.allocation_interval),
                    "--slave-reregister-timeout",
                    str(c.slave_reregister_timeout),
                    "--slave-timeout",
                    str(c.slave_timeout),
                    "--offer-timeout",
                    "10",
                ],
            )
        for i in range(c.slaves):
            await self._launch(
                "slave",
                f"slave{i}",
                [
                    "--resources",
                    c.slave_resources,
                    "--work-dir",
                    str(self.run_dir / f"slave{i}"),
                    "--hostname",
                    f"host{i}",
                ],
            )
        for i in range(c.frameworks):
            name = f"fw{i}"
            await self._launch(
                "framework",
                name,
                [
                    "journaled",
                    "--name",
                    name,
                    "--journal",
                    str(self.journal(name)),
                    "--witness-dir",
                    str(self.witness_dir),
                    "--size",
                    str(c.tasks_each),
                    "--resources",
                    c.task,
                    "--task-duration",
                    c.task_duration,
                    "--failover-timeout",
                    str(c.failover_timeout),
                    "--seed",
                    str(i),
                    "--stop-file",
                    str(self.stop_file),
                    *(["--work", str(c.work_items)] if c.work_items else []),
                    *(["--partition-aware"] if i < c.partition_aware else []),
                ],
            )

    @property
    def stop_file(self) -> Path:
        """Made by `drain`: the frameworks launch nothing more."""
        return self.run_dir / "drain"

    async def drain(self) -> None:
        await asyncio.to_thread(self.stop_file.touch)

    def _make_run_dir(self) -> None:
        """The run dir, where the slaves' tasks (their principal's users, on a slave as
        root) reach their sandboxes, and the witness dir they all write to (sticky, as
        /tmp: each task's marks are its own). The witness dir is a temp dir of its own
        in /tmp: under pytest's, a pytest session started meanwhile (a developer running
        one test beside the suite) makes /tmp/pytest-of-USER 0700 again, and every task
        after that fails to reach it."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        reachable(self.run_dir)
        self.witness_dir = Path(tempfile.mkdtemp(prefix="drfmesos-witness-"))
        os.chmod(self.witness_dir, 0o1777)

    def journal(self, framework: str) -> Path:
        return self.run_dir / f"{framework}.journal"

    async def _launch(self, kind: str, name: str, args: list[str]) -> Party:
        self._commands[name] = (kind, args)
        party = await self.launcher.start(kind, name, *args)
        self.parties[name] = party
        return party

    async def _start_watching(self) -> None:
        bus = Bus(self.broker.url, name="ha-watch")
        leaders = Dispatcher(bus, "watch")
        leaders.on(Leader, self._on_leader)
        states = Dispatcher(bus, "watch")
        states.on(State, self._on_state)
        await bus.subscribe(self.topics.leader, leaders)
        await bus.subscribe(self.topics.state, states)
        await bus.start()
        self._watch = bus

    async def _on_leader(self, msg: Leader, _reply_to: str | None) -> None:
        if self.leaders and msg.epoch <= self.leaders[-1][1].epoch:
            return  # the same leader, re-announced (a broker restart, a reconnect)
        now = time.monotonic()
        self.leaders.append((now, msg))
        for f in self.failovers:
            if f.ended is None:
                f.ended = now
        self.leader_changed.set()

    async def _on_state(self, msg: State, _reply_to: str | None) -> None:
        leader = self.leader
        if leader is not None and msg.epoch < leader.epoch:
            return  # a deposed master's last word (or its retained snapshot)
        self.state = msg
        self.state_changed.set()

    async def stop(self) -> None:
        await self.launcher.stop_all(grace=10)
        if self._watch is not None:
            await self._watch.close()
            self._watch = None
        await self.broker.stop()
        self.broker.cleanup()  # (its config and persistence: a soak's temp dir)
        for link in self.links.values():
            await link.stop()
        await self.zk.close()
        if self.witness_dir.parent != self.run_dir:
            await asyncio.to_thread(shutil.rmtree, self.witness_dir, True)

    async def __aenter__(self) -> HACluster:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- who leads -----------------------------------------------------------------------------
    @property
    def leader(self) -> Leader | None:
        return self.leaders[-1][1] if self.leaders else None

    def leader_name(self) -> str | None:
        leader = self.leader
        if leader is None:
            return None
        port = leader.http.rstrip("/").rpartition(":")[2]
        return next((n for n, p in self.http_ports.items() if str(p) == port), None)

    async def wait_for_leader(self, newer_than: int = 0, timeout: float = 30.0) -> Leader:
        async def led() -> Leader:
            while True:
                leader = self.leader
                if leader is not None and leader.epoch > newer_than:
                    return leader
                self.leader_changed.clear()
                await self.leader_changed.wait()

        return await within(led(), timeout)

    async def wait_for_state(self, condition: object, timeout: float = 60.0) -> State:
        """The first state snapshot for which `condition(state)` holds."""
        assert callable(condition)

        async def holds() -> State:
            while True:
                state, leader = self.state, self.leader
                current = state is not None and (leader is None or state.epoch == leader.epoch)
                if current and condition(state):
                    assert state is not None
                    return state
                self.state_changed.clear()
                await self.state_changed.wait()

        return await within(holds(), timeout)

    # -- breaking things -------------------------------------------------------------------
    def kill(self, name: str) -> None:
        """kill -9, and the party's whole session (its tasks stay only for slaves, whose
        command tasks run in sessions of their own)."""
        party = self.parties[name]
        if name == self.leader_name():
            self.failovers.append(Failover(time.monotonic(), cause=f"kill -9 {name}"))
        with contextlib.suppress(ProcessLookupError):
            party.proc.send_signal(signal.SIGKILL)

    async def restart(self, name: str) -> Party:
        party = self.parties[name]
        await party.proc.wait()
        self.launcher.parties.remove(party)
        kind, args = self._commands[name]
        return await self._launch(kind, name, args)

    async def kill_broker(self) -> None:
        await self.broker.stop(kill=True)

    async def restart_broker(self) -> None:
        await self.broker.start()

    async def kill_zookeeper(self) -> None:
        if self.leader_name() is not None:
            self.failovers.append(Failover(time.monotonic(), cause="kill -9 zookeeper"))
        await self.zk.stop(kill=True)

    async def restart_zookeeper(self) -> None:
        await self.zk.start()

    # -- what happened ---------------------------------------------------------------------
    def fates(self) -> dict[str, TaskFate]:
        fates: dict[str, TaskFate] = defaultdict(TaskFate)
        for i in range(self.config.frameworks):
            path = self.journal(f"fw{i}")
            if not path.exists():
                continue
            for line in path.read_text().splitlines():
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if "launch" in record:
                    fates[record["launch"]].launched = True
                elif "task" in record:
                    fate = fates[record["task"]]
                    fate.states.append(record["state"])
                    uuid = record.get("uuid") or ""
                    new = bool(uuid) and uuid not in fate.uuids
                    fate.uuids.add(uuid)
                    if record.get("terminal"):
                        fate.terminal.add(record["state"])
                        fate.ended_by_update |= bool(uuid)
                    elif fate.ended_by_update and new and record["state"] == "TASK_RUNNING":
                        fate.running_after_end = True
        return dict(fates)

    def work(self) -> dict[str, WorkFate]:
        """Every framework's work items, with what became of their tasks."""
        c = self.config
        items = {
            item: WorkFate()
            for i in range(c.frameworks)
            for item in work_items(f"fw{i}", c.work_items)
        }
        for task_id, fate in self.fates().items():
            work = items.get(item_of(task_id))
            if work is not None and fate.launched:
                work.tasks += 1
                work.finished += "TASK_FINISHED" in fate.terminal
                work.errors += "TASK_ERROR" in fate.terminal
        return items

    def busy(self) -> set[str]:
        """The frameworks with work items still to finish (all of them, when endless)."""
        names = {f"fw{i}" for i in range(self.config.frameworks)}
        if not self.config.work_items:
            return names
        return {i.rsplit("-w", 1)[0] for i, w in self.work().items() if not w.finished}

    def overlaps(self) -> list[str]:
        """Work items whose task found another of theirs running: done twice at once."""
        path = self.witness_dir / "overlaps"
        return path.read_text().split() if path.exists() else []

    def doubles(self) -> list[str]:
        """Tasks that found their own mark already made: they ran twice."""
        path = self.witness_dir / "doubles"
        return path.read_text().split() if path.exists() else []


class Link:
    """A TCP forwarder to one address that can be cut (every byte dropped, connections
    left open, as a network partition looks to both ends) and healed."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = free_port()
        self.cut = False
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        for a, b in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(a, b))
            self._pipes.add(task)
            task.add_done_callback(self._pipes.discard)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                if not self.cut:
                    writer.write(data)
                    await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._pipes):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def books_balance(state: State) -> tuple[Resources, Resources]:
    """(what the frameworks hold, what their live tasks use): equal when the books balance."""
    held = sum((f.allocated for f in state.frameworks), Resources())
    used = sum((t.resources for t in state.tasks), Resources())
    return held, used


def share_spread(state: State, among: set[str] | None = None) -> float:
    """max - min dominant share among the connected frameworks (0: perfectly even); with
    `among`, only the frameworks of those names (those that still have work to do)."""
    shares = [
        f.dominant_share
        for f in state.frameworks
        if f.active and (among is None or f.name in among)
    ]
    return max(shares) - min(shares) if shares else 0.0


__all__ = [
    "Failover",
    "HACluster",
    "HAConfig",
    "TaskFate",
    "WorkFate",
    "books_balance",
    "share_spread",
]
