"""Small test helpers: collecting what arrives on the bus, and waiting on conditions."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import functools
import os
import shutil
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiomqtt
import pytest

from cluster.local.launcher import Launcher
from cluster.local.secure import as_principal, provision
from cluster.local.view import wait_state
from frameworks import Scheduler, SchedulerDriver
from frameworks.samples.command import CommandScheduler
from frameworks.scheduler import Driver
from master.http.connections import Doorman, _Door
from master.master import Master, MasterConfig
from protocol.tooling.brokers import BrokerURL, MosquittoBroker
from protocol.tooling.credentials import Store
from protocol.transport.aio import within
from protocol.transport.base import Connector, Transport, Will
from protocol.transport.memory import MemoryBroker
from protocol.wire.messages import Offer, State, TaskState, TaskStatus, Wire
from protocol.wire.reservations import shared_once, stripped
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics
from slave.slave import Slave, SlaveConfig

W = TypeVar("W", bound=Wire)


class Inbox:
    """Collects every message handed to it; tests wait for the ones they expect."""

    def __init__(self) -> None:
        self.messages: list[tuple[Wire, str | None]] = []
        self._changed = asyncio.Condition()

    async def __call__(self, message: Wire, reply_to: str | None) -> None:
        async with self._changed:
            self.messages.append((message, reply_to))
            self._changed.notify_all()

    def of(self, kind: type[W]) -> list[W]:
        return [m for m, _ in self.messages if isinstance(m, kind)]

    async def wait_for(
        self, kind: type[W], where: Callable[[W], bool] = lambda m: True, timeout: float = 10.0
    ) -> W:
        """The first message of `kind` matching `where`, waiting for it to arrive."""

        def find() -> W | None:
            return next((m for m in self.of(kind) if where(m)), None)

        await self.wait_until(lambda: find() is not None, timeout)
        found = find()
        assert found is not None
        return found

    async def wait_until(self, condition: Callable[[], bool], timeout: float = 10.0) -> None:
        """Wait until `condition()` holds of what has arrived."""
        async with self._changed:
            await within(self._changed.wait_for(condition), timeout)

    async def wait_count(self, kind: type[W], n: int, timeout: float = 10.0) -> list[W]:
        await self.wait_until(lambda: len(self.of(kind)) >= n, timeout)
        return self.of(kind)


async def eventually(
    condition: Callable[[], bool], timeout: float = 10.0, interval: float = 0.02
) -> None:
    """Wait until `condition()` holds (for state that no message announces)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(interval)


async def state_when(
    master: Master, condition: Callable[[State], bool], timeout: float = 10.0
) -> State:
    """An in-process master's state once `condition` holds of it (what `wait_state` reads
    from a live cluster's bus)."""
    await eventually(lambda: condition(master.views.state()), timeout)
    state: State = master.views.state()
    return state


def books_balance(master: Master) -> None:
    """The allocator's books agree with the master's records of offers and tasks: what
    each framework holds on each slave (a shared volume: a copy each offer or task), what
    is allocated on each slave (a shared volume once, however many copies are out), and
    the totals (the allocator's by what resources are, reservations stripped)."""
    a = master.allocator
    want: dict[tuple[str, str], Resources] = {}  # (framework, slave) -> held

    def hold(framework_id: str, slave_id: str, resources: Resources) -> None:
        key = (framework_id, slave_id)
        want[key] = want.get(key, Resources()) + resources

    for record in master.books.offers.values():
        hold(record.framework_id, record.slave_id, record.resources)
    for fw in master.books.frameworks.values():
        for task in fw.tasks.values():
            if not task.freed:  # (ended on its slave, its last updates still owed)
                hold(fw.framework_id, task.slave_id, task.resources)
        for (slave_id, _), resources in fw.executors.items():  # custom executors' own
            hold(fw.framework_id, slave_id, resources)
    assert {s for _, s in want} <= set(a.slaves), "held on a slave the allocator lost"
    for framework_id in master.books.frameworks:
        for slave_id in a.slaves:
            held = want.get((framework_id, slave_id), Resources())
            assert a.held(framework_id, slave_id) == held, (framework_id, slave_id)
    for slave_id, book in a.slaves.items():
        # (and what tasks of frameworks not back yet hold: the allocator's unowned)
        out = sum((r for (_, s), r in want.items() if s == slave_id), Resources())
        out = out + Resources.from_millis(book.unowned)
        once = shared_once(out.millis, book.total.millis)
        assert a.held_on(slave_id) == Resources.from_millis(once), slave_id
    assert a.total == Resources.from_millis(
        stripped(sum((s.total for s in master.books.slaves.values()), Resources()).millis)
    )
    for slave in master.books.slaves.values():  # no port held twice, none not the slave's
        holders = [
            master.books.offers[o].discrete for o in slave.offers if o in master.books.offers
        ]
        for framework_id, task_id in slave.tasks:
            live = master.books.task(framework_id, task_id)
            if live is not None and not live.terminal:
                holders.append(live.info.discrete)
        for i, d in enumerate(holders):
            assert slave.discrete.contains(d), (slave.slave_id, d)
            assert not any(d.overlap(other) for other in holders[i + 1 :]), holders


def held_on(master: Master, slave_id: str) -> Resources:
    """What tasks hold of a slave, anybody's or nobody's (neither free nor offered)."""
    books = master.books
    offered = sum(
        (o.resources for o in books.offers.values() if o.slave_id == slave_id), Resources()
    )
    free = master.allocator.free(slave_id) + offered
    return books.slaves[slave_id].total.subtract_clamped(free)


def raw_client(url: BrokerURL, **kw: object) -> aiomqtt.Client:
    """A bare MQTT client as `url`'s principal (what an attacker would write)."""
    return aiomqtt.Client(
        url.host,
        url.port,
        username=url.username,
        password=url.password,
        identifier=url.username,
        tls_context=url.ssl_context(),
        **kw,  # type: ignore[arg-type]
    )


@contextlib.asynccontextmanager
async def live_cluster(
    url: BrokerURL,
    cluster: str,
    work: Path,
    master_args: Sequence[str] = (),
    slave_args: Sequence[str] = (),
    slaves: int = 2,
    resources: str = "cpus:2;mem:1024",
) -> AsyncIterator[Launcher]:
    """A master and `slaves` slaves as real processes, up and registered. (Its HTTP API
    on a free port unless `master_args` say: 5050 is the demo's, which a test holds.)"""
    launcher = Launcher(url, cluster, work, log_level="warning")
    if "--http" not in master_args:
        master_args = ["--http", "127.0.0.1:0", *master_args]
    try:
        await launcher.start("master", "master", *master_args)
        for i in range(slaves):
            await launcher.start(
                "slave",
                f"slave-{i}",
                "--resources",
                resources,
                "--work-dir",
                str(work / f"slave-{i}"),
                *slave_args,
            )
        await wait_state(url, cluster, lambda s: s.slaves_registered == slaves)
        yield launcher
    finally:
        await launcher.stop_all()
        kill_processes_under(work)


def kill_processes_under(directory: Path) -> None:
    """A slave that stops leaves its tasks running (a restarted one recovers them, as
    Mesos's agent does): a test's tasks, in sandboxes under `directory`, end with it."""
    for pid in processes_under(directory):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def processes_under(directory: Path) -> list[int]:
    """Processes running in a sandbox under `directory` (a slave's work dir)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if Path(os.readlink(entry / "cwd")).is_relative_to(directory):
                    found.append(int(entry.name))
    return found


def basic(user: str, secret: str) -> str:
    """An HTTP Basic Authorization header's value."""
    return "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()


def printer(
    url: BrokerURL, store: Store, cluster: str, command: str, count: int = 1
) -> tuple[CommandScheduler, SchedulerDriver]:
    """The `printer` principal's framework, running `command` in `count` small tasks."""
    scheduler = CommandScheduler(
        "printer", command, count, Resources(cpus=0.5, mem=64), echo=lambda _: None
    )
    driver = SchedulerDriver(
        scheduler, name="printer", broker=as_principal(url, store, "printer"),
        cluster=cluster, role="printer",
    )  # fmt: skip
    return scheduler, driver


@contextlib.asynccontextmanager
async def secure_master(
    work: Path, cluster: str, principals: Sequence[tuple[str, ...]], *master_args: str
) -> AsyncIterator[tuple[MosquittoBroker, Store, Launcher]]:
    """A secured cluster's core as real processes: a new credentials store of
    `principals`, mosquitto with TLS checking it, and a master (principal `master`)
    serving HTTP on a free port. The launcher starts the rest."""
    store = await asyncio.to_thread(provision, work / "auth", principals)
    broker = MosquittoBroker(auth=store.path, tls=True)
    await broker.start()
    launcher = Launcher(broker.url, cluster, work, "warning", store)
    try:
        await launcher.start(
            "master", "master", "--principals", str(store.principals_file),
            "--http", "127.0.0.1:0", "--allocation-interval", "0.1", *master_args,
        )  # fmt: skip
        yield broker, store, launcher
    finally:
        await launcher.stop_all()
        await broker.stop()
        broker.cleanup()


async def until(changed: asyncio.Event, condition: Callable[[], bool], timeout: float) -> None:
    """Wait until `condition()` holds, looking again each time `changed` is set."""
    async with asyncio.timeout(timeout):
        while not condition():
            changed.clear()
            await changed.wait()


@contextlib.contextmanager
def longest_step() -> Iterator[list[float]]:
    """The CPU time of the longest single step of this thread's event loop meanwhile (in
    [0], seconds): how long the loop was kept from everything else by one callback, not
    counting time the machine gave other processes (these machines are shared)."""
    longest = [0.0]
    run = asyncio.events.Handle._run

    def timed(handle: asyncio.events.Handle) -> None:
        began = time.thread_time()
        run(handle)
        longest[0] = max(longest[0], time.thread_time() - began)

    asyncio.events.Handle._run = timed  # type: ignore[assignment]
    try:
        yield longest
    finally:
        asyncio.events.Handle._run = run  # type: ignore[method-assign]


class Recorder(Scheduler):
    """A scheduler that keeps what arrives; tests decide what to do with offers."""

    def __init__(self) -> None:
        self.offers: list[Offer] = []
        self.statuses: list[TaskStatus] = []
        self.errors: list[str] = []
        self.changed = asyncio.Event()

    async def resource_offers(self, driver: Driver, offers: list[Offer]) -> None:
        self.offers.extend(offers)
        self.changed.set()

    async def status_update(self, driver: Driver, status: TaskStatus) -> None:
        self.statuses.append(status)
        self.changed.set()

    async def error(self, driver: Driver, message: str) -> None:
        self.errors.append(message)
        self.changed.set()

    def of(self, task_id: str) -> list[TaskStatus]:
        return [s for s in self.statuses if s.task_id == task_id]

    def states(self, task_id: str) -> list[TaskState]:
        return [s.state for s in self.of(task_id)]

    async def wait(self, condition: Callable[[], bool], timeout: float = 20.0) -> None:
        await until(self.changed, condition, timeout)

    async def update(self, task_id: str, state: TaskState, timeout: float = 20.0) -> TaskStatus:
        """The first update of `task_id` in `state`, waiting for it."""

        def found() -> TaskStatus | None:
            return next((s for s in self.of(task_id) if s.state == state), None)

        await self.wait(lambda: found() is not None, timeout)
        status = found()
        assert status is not None
        return status

    async def offer_on(self, driver: SchedulerDriver, slave_id: str | None = None) -> Offer:
        """An outstanding offer (of `slave_id`, if named), waiting for one."""

        def found() -> Offer | None:
            return next(
                (
                    o
                    for o in self.offers
                    if o.offer_id in driver.offers and slave_id in (None, o.slave_id)
                ),
                None,
            )

        await self.wait(lambda: found() is not None)
        offer = found()
        assert offer is not None
        return offer


async def open_transport(
    stack: contextlib.AsyncExitStack,
    connect: Connector,
    name: str,
    inbox: str | None = None,
    will: Will | None = None,
) -> Transport:
    """A connected transport (the MQTT bus or the memory one), closed with `stack`."""
    transport = connect(name=name, inbox=inbox, will=will)
    await transport.start()
    stack.push_async_callback(transport.close)
    return transport


SECURE_SLAVE = Resources(cpus=4, mem=1024)


async def start_secure_slaves(
    stack: contextlib.AsyncExitStack,
    connect: Callable[[str], Connector],
    topics: Topics,
    work: Path,
    slaves: Sequence[tuple[str, str]] = (("slave-a", "sa"), ("slave-b", "sb")),
    *,
    simulated: bool = True,
    started: dict[str, Slave] | None = None,
    resources: Resources = SECURE_SLAVE,
) -> dict[str, Transport]:
    """Slaves of 4 CPUs / 1 GB (or `resources`; simulated tasks, or real processes), each on its
    principal's connection (Last Will set), stopped with `stack` (and their real processes
    killed: a test leaves none behind); their buses, by principal. The slaves themselves
    go into `started`, by slave id. `connect`: a principal's transport maker."""
    buses = {}
    for principal, sid in slaves:
        bus = await open_transport(
            stack,
            connect(principal),
            sid,
            inbox=topics.outbox("slave", principal),
            will=(topics.gone("slave", principal), "slave", principal),
        )
        buses[principal] = bus
        config = SlaveConfig(
            slave_id=sid,
            hostname=sid,
            resources=resources,
            work_dir=work / sid,
            simulated_tasks=simulated,
            cluster=topics.cluster,
        )
        slave = Slave(bus, topics, config)
        await slave.start()
        if started is not None:
            started[sid] = slave
        stack.push_async_callback(functools.partial(slave.stop, kill_tasks=not simulated))
    return buses


async def start_master(
    stack: contextlib.AsyncExitStack,
    connect: Connector,
    topics: Topics,
    config: MasterConfig,
    name: str = "master",
    **kw: Any,
) -> Master:
    """A master in this process on its own connection `name` (`kw`: its registry, say),
    stopped with `stack`."""
    bus = await open_transport(stack, connect, name)
    master = Master(bus, topics, config, **kw)
    await master.start()
    stack.push_async_callback(master.stop)
    return master


async def start_simulated_slave(
    stack: contextlib.AsyncExitStack,
    connect: Connector,
    topics: Topics,
    work: Path,
    resources: Resources,
) -> Slave:
    """Slave s1 (host s1.local; simulated tasks) in this process on `work`, started and
    stopped with `stack` (not yet registered: a test waits for what it needs)."""
    bus = await open_transport(stack, connect, "s1", inbox=topics.slave("slave", "s1"))
    config = SlaveConfig(
        slave_id="s1",
        hostname="s1.local",
        resources=resources,
        work_dir=work,
        cluster=topics.cluster,
        simulated_tasks=True,
    )
    slave = Slave(bus, topics, config)
    await slave.start()
    stack.push_async_callback(slave.stop)
    return slave


@dataclasses.dataclass
class SecureCluster:
    """A live secure cluster: mosquitto with TLS checking `store`, and its master's HTTP."""

    url: BrokerURL
    store: Store
    web: str  # the master's HTTP address
    launcher: Launcher


@contextlib.asynccontextmanager
async def secure_cluster(
    work: Path,
    cluster: str,
    principals: Sequence[tuple[str, ...]],
    slaves: Sequence[Sequence[str]],
    master_args: Sequence[str] = (),
) -> AsyncIterator[SecureCluster]:
    """A master (`--http` on a free port) and a slave per item of `slaves` (its principal,
    then its arguments) as processes, on mosquitto with TLS and a new store of
    `principals` (name, kind); "ops" must be an operator among them."""
    async with secure_master(work, cluster, principals, *master_args) as (broker, store, launcher):
        for name, *args in slaves:
            await launcher.start("slave", name, "--work-dir", str(work / name), *args)
        ops = as_principal(broker.url, store, "ops")
        state = await wait_state(
            ops, cluster, lambda s: len(s.slaves) == len(slaves) and bool(s.web_ui)
        )
        yield SecureCluster(broker.url, store, state.web_ui, launcher)


@dataclasses.dataclass
class InProcess:
    """A master and slaves in this process on the memory transport (no credentials)."""

    broker: MemoryBroker
    topics: Topics
    master: Master
    slaves: list[Slave]

    @property
    def connect(self) -> Connector:
        return self.broker.connector(None)


@contextlib.asynccontextmanager
async def in_process_cluster(
    cluster: str,
    work: Path,
    config: MasterConfig,
    slaves: int = 2,
    resources: Resources = Resources(cpus=2, mem=1024),  # noqa: B008
) -> AsyncIterator[InProcess]:
    """What `live_cluster` starts as processes, in this process: for tests of the handlers
    and the SDK; tasks still run as real processes in sandboxes under `work`."""
    broker, topics = MemoryBroker(), Topics(cluster)
    async with contextlib.AsyncExitStack() as stack:
        bus = await open_transport(stack, broker.connector(None), "master")
        master = Master(bus, topics, config)
        await master.start()
        stack.push_async_callback(master.stop)
        started = []
        for i in range(slaves):
            sid = f"slave-{i}"
            slave_bus = await open_transport(
                stack, broker.connector(None), sid, inbox=topics.outbox("slave", "slave")
            )
            slave = Slave(
                slave_bus,
                topics,
                SlaveConfig(sid, sid, resources, work / sid, cluster=cluster),
            )
            await slave.start()
            stack.push_async_callback(functools.partial(slave.stop, kill_tasks=True))
            started.append(slave)
        await eventually(lambda: len(master.books.slaves) == slaves)
        yield InProcess(broker, topics, master, started)


@contextlib.asynccontextmanager
async def running(driver: SchedulerDriver) -> AsyncIterator[SchedulerDriver]:
    """`driver` started, then stopped and joined on leaving."""
    await driver.start()
    try:
        yield driver
    finally:
        driver.stop()
        await driver.join()


def framework(
    cluster: InProcess, scheduler: Scheduler, name: str = "pods", **kw: Any
) -> contextlib.AbstractAsyncContextManager[SchedulerDriver]:
    """A framework `name` of `scheduler` on an in-process cluster, running meanwhile
    (`kw`: more of its driver's settings)."""
    driver = SchedulerDriver(
        scheduler, name=name, broker=cluster.connect, cluster=cluster.topics.cluster, **kw
    )
    return running(driver)


def held(c: InProcess, framework_id: str, slave_id: str) -> Resources:
    """What the allocator holds for the framework on the slave, its offers left out."""
    offered = sum(
        (
            r.resources
            for r in c.master.books.offers.values()
            if r.framework_id == framework_id and r.slave_id == slave_id
        ),
        Resources(),
    )
    return c.master.allocator.held(framework_id, slave_id) - offered


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


def door_from(doorman: Doorman, address: str) -> _Door:
    """A connection of the master's HTTP doorman as if from `address`, not yet admitted
    (`Doorman.admit` counts it, or refuses it): no socket behind it."""
    door = doorman()
    assert isinstance(door, _Door)
    door.address = address
    return door
