"""A secured cluster (credentials, TLS, ACLs) with a victim framework, and an attacker with
valid credentials: what the trust and tenant tests attack."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cluster.local.secure import provision
from frameworks.driver import SchedulerDriver
from frameworks.scheduler import Driver, Scheduler, build_task
from master.books import Framework as MasterFramework
from master.master import Master, MasterConfig
from protocol.tooling.brokers import BrokerURL, EmbeddedBroker, MosquittoBroker
from protocol.tooling.credentials import Store
from protocol.transport.base import Connector, Transport
from protocol.transport.bus import Bus, MqttConnector
from protocol.transport.memory import MemoryBroker
from protocol.wire.messages import (
    Error,
    Filters,
    Offer,
    TaskInfo,
    TaskState,
    TaskStatus,
    Wire,
)
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics
from slave.slave import Slave

from conftest import need_mosquitto
from harness.helpers import (
    Inbox,
    books_balance,
    eventually,
    open_transport,
    start_secure_slaves,
)

T = Topics("trust")


PRINCIPALS = [
    ("master", "master"),
    ("slave-a", "slave"),
    ("slave-b", "slave"),
    ("alice", "framework"),
    ("mallory", "framework"),
    ("ops", "operator"),
]


CONFIG = MasterConfig(
    allocation_interval=0.1, heartbeat_interval=0.5, slave_timeout=60, state_interval=0.1
)


class Victim(Scheduler):
    """Launches one long task on the first offer, declines the rest briefly."""

    def __init__(self) -> None:
        self.statuses: list[TaskStatus] = []
        self.errors: list[str] = []
        self.launched = asyncio.Event()
        self.offers: list[Offer] = []

    async def resource_offers(self, driver: Driver, offers: list[Offer]) -> None:
        self.offers += offers
        for offer in offers:
            if not self.launched.is_set():
                self.launched.set()
                task = build_task(
                    offer,
                    "long",
                    Resources(cpus=1, mem=64),
                    task_id="victim-task",
                    command="sleep 300",
                )
                await driver.launch_tasks([offer.offer_id], [task])
            # keep this one: an outstanding offer of alice's for mallory to go after

    async def status_update(self, driver: Driver, status: TaskStatus) -> None:
        self.statuses.append(status)

    async def error(self, driver: Driver, message: str) -> None:
        self.errors.append(message)


@dataclass
class Secure:
    store: Store
    url: BrokerURL  # no credentials
    master: Master
    alice: SchedulerDriver
    victim: Victim
    stack: contextlib.AsyncExitStack
    slave_buses: dict[str, Transport]
    slaves: dict[str, Slave] = field(default_factory=dict)  # by slave id
    memory: MemoryBroker | None = None  # the in-process broker, instead of a real one

    reload_broker: Callable[[], None] = lambda: None  # what `drfmesos broker` does on change

    def as_(self, name: str) -> BrokerURL:
        return self.url.with_credentials(name, self.store.secret_file(name).read_text().strip())

    def connect(self, name: str) -> Connector:
        """`name`'s transport maker: on the memory broker, or on the real one as `as_`."""
        return self.memory.connector(name) if self.memory else MqttConnector(self.as_(name))

    async def attacker(self, name: str = "mallory", kind: str = "framework") -> Attacker:
        inbox = T.outbox(kind, name) + "/in"
        bus = await open_transport(self.stack, self.connect(name), name, inbox=inbox)
        attacker = Attacker(bus, T.inbound(kind, name))
        await bus.subscribe(T.outbox(kind, name) + "/#", attacker.inbox)
        return attacker


@dataclass
class Attacker:
    bus: Transport
    to_master: str
    inbox: Inbox = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        self.inbox = Inbox()

    async def call(self, message: Wire) -> Error:
        """Send a call and wait for the master's Error about it."""
        seen = len(self.inbox.of(Error))
        await self.bus.publish(self.to_master, message)
        return (await self.inbox.wait_count(Error, seen + 1))[seen]


@pytest.fixture(params=["embedded", "mosquitto"])
async def secure(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Secure]:
    async with secure_cluster(request.param, tmp_path) as sec:
        yield sec


@contextlib.asynccontextmanager
async def secure_cluster(
    kind: str, tmp_path: Path, *, simulated: bool = True
) -> AsyncIterator[Secure]:
    """The cluster every test here runs on, on broker `kind` (`memory`: in process, with
    the store's ACL; see protocol.transport.memory); `simulated=False` runs the slaves'
    tasks as real processes in sandboxes under `tmp_path`."""
    if kind == "mosquitto":
        need_mosquitto()
    store = provision(tmp_path / "auth", PRINCIPALS)
    broker: EmbeddedBroker | MosquittoBroker | None = (
        EmbeddedBroker(auth=store.path, tls=True)
        if kind == "embedded"
        else MosquittoBroker(auth=store.path, tls=True)
        if kind == "mosquitto"
        else None
    )
    if broker is not None:
        await broker.start()
    try:
        async with contextlib.AsyncExitStack() as stack:
            url = broker.url if broker else BrokerURL("memory", 0)
            sec = Secure(store, url, None, None, Victim(), stack, {})  # type: ignore[arg-type]
            if broker is None:
                sec.memory = MemoryBroker(store.principals.values())
            if isinstance(broker, MosquittoBroker):
                sec.reload_broker = broker.reload
            config = MasterConfig(**{**CONFIG.__dict__, "principals": store.principals_file})
            if broker is None:
                mbus = await open_transport(stack, sec.connect("master"), "master")
            else:
                mbus = await stack.enter_async_context(
                    Bus(sec.as_("master"), name="master", persistent=True)
                )
            sec.master = Master(mbus, T, config)
            await sec.master.start()
            stack.push_async_callback(sec.master.stop)
            sec.slave_buses = await start_secure_slaves(
                stack, sec.connect, T, tmp_path, simulated=simulated, started=sec.slaves
            )
            sec.alice = SchedulerDriver(
                sec.victim,
                name="alice",
                broker=sec.connect("alice"),
                cluster=T.cluster,
                role="alice",
            )
            await sec.alice.start()
            stack.push_async_callback(sec.alice._close)
            await sec.victim.launched.wait()
            await eventually(lambda: victim_running(sec), timeout=15)
            yield sec
    finally:
        if broker is not None:
            await broker.stop()
        if isinstance(broker, MosquittoBroker):
            broker.cleanup()


async def flood_from_mallory(
    sec: Secure, rounds: int, *files: str, **kw: Any
) -> asyncio.subprocess.Process:
    """mallory's own process (tests/programs/flood.py): `rounds` Revives, or of `files`.
    Niced: a real attacker floods from its own machine; here it shares the master's two
    cores, and at equal priority the flooder's and the broker's CPU would be taken from the
    master's (the master's share of the machine is not what the fair intake promises)."""
    mallory = sec.as_("mallory")
    return await asyncio.create_subprocess_exec(
        *("nice", "-n", "10"),
        sys.executable,
        str(Path(__file__).parent.parent / "programs" / "flood.py"),
        f"mqtts://mallory@{mallory.host}:{mallory.port}",
        sec.url.ca or "",
        T.inbound("framework", "mallory"),
        str(rounds),
        *files,
        env={**os.environ, "FLOOD_SECRET": mallory.password or ""},
        **kw,
    )


class Hoarder(Scheduler):
    """Launches tasks made by `task` (of an offer and a number from 1), `at_once` an offer,
    until `total` are launched; then declines every offer for a minute."""

    def __init__(self, task: Callable[[Offer, int], TaskInfo], total: int, at_once: int):
        self.task, self.total, self.at_once = task, total, at_once
        self.n = 0

    async def resource_offers(self, driver: Driver, offers: list[Offer]) -> None:
        for offer in offers:
            tasks: list[TaskInfo] = []
            while self.n < self.total and len(tasks) < self.at_once:
                self.n += 1
                tasks.append(self.task(offer, self.n))
            if tasks:
                await driver.launch_tasks([offer.offer_id], tasks, Filters(refuse_seconds=0))
            else:
                await driver.decline_offer(offer.offer_id, Filters(refuse_seconds=60))


@contextlib.asynccontextmanager
async def hoarding(tmp_path: Path, hoarder: Hoarder) -> AsyncIterator[MasterFramework]:
    """mallory's framework of `hoarder` on a secure cluster on the memory transport: the
    master's record of it, once its tasks are all live (within 60 s)."""
    sec: Secure
    async with secure_cluster("memory", tmp_path) as sec, contextlib.AsyncExitStack() as stack:
        mallory = SchedulerDriver(
            hoarder, name="mallory", broker=sec.connect("mallory"), cluster=T.cluster,
            role="mallory",
        )  # fmt: skip
        await mallory.start()
        stack.push_async_callback(mallory._close)
        fw = sec.master.books.frameworks[mallory.framework_id or ""]
        await eventually(lambda: len(fw.tasks) >= hoarder.total, timeout=60)
        yield fw


def draw(strategy: st.SearchStrategy[Wire], n: int) -> list[Wire]:
    """`n` examples of `strategy`, the same ones every run."""
    out: list[Wire] = []

    @settings(
        max_examples=1, database=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )
    @given(st.lists(strategy, min_size=n, max_size=n))
    def take(examples: list[Wire]) -> None:
        out[:] = examples

    take()
    return out


def victim_running(sec: Secure) -> bool:
    fw = sec.master.books.frameworks.get(sec.alice.framework_id or "")
    task = fw.tasks.get("victim-task") if fw else None
    return task is not None and task.state == TaskState.RUNNING


def intact(sec: Secure) -> None:
    """The victim's task still runs, nothing of the victim's changed, the books balance."""
    assert victim_running(sec)
    fw = sec.master.books.frameworks[sec.alice.framework_id or ""]
    assert fw.principal == "alice"
    assert fw.connected
    books_balance(sec.master)
