"""Small test helpers: collecting what arrives on the bus, and waiting on conditions."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TypeVar

import aiomqtt

from cluster.launcher import Launcher
from cluster.view import wait_state
from master.master import Master
from protocol.brokers import BrokerURL
from protocol.bus import Bus
from protocol.messages import Wire
from protocol.resources import Resources
from protocol.topics import Topics
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
            await asyncio.wait_for(self._changed.wait_for(condition), timeout)

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


def books_balance(master: Master) -> None:
    """The allocator's books agree with the master's records of offers and tasks."""
    a = master.allocator
    held = Resources()
    for record in master.books.offers.values():
        held = held + record.resources
    for fw in master.books.frameworks.values():
        for task in fw.tasks.values():
            held = held + task.resources
    assert a.allocated_total() == held
    assert a.total == sum((s.total for s in master.books.slaves.values()), Resources())


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
    """A master and `slaves` slaves as real processes, up and registered."""
    launcher = Launcher(url, cluster, work, log_level="warning")
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
        await wait_state(url, cluster, lambda s: len(s.slaves) == slaves)
        yield launcher
    finally:
        await launcher.stop_all()


async def until(changed: asyncio.Event, condition: Callable[[], bool], timeout: float) -> None:
    """Wait until `condition()` holds, looking again each time `changed` is set."""
    async with asyncio.timeout(timeout):
        while not condition():
            changed.clear()
            await changed.wait()


async def start_secure_slaves(
    stack: contextlib.AsyncExitStack,
    as_: Callable[[str], BrokerURL],
    topics: Topics,
    work: Path,
    slaves: Sequence[tuple[str, str]] = (("slave-a", "sa"), ("slave-b", "sb")),
) -> dict[str, Bus]:
    """Slaves of 4 CPUs / 1 GB with simulated tasks, each on its principal's connection
    (Last Will set), stopped with `stack`; their buses, by principal."""
    buses = {}
    for principal, sid in slaves:
        bus = await stack.enter_async_context(
            Bus(
                as_(principal),
                name=sid,
                inbox=topics.outbox("slave", principal),
                will=(topics.gone("slave", principal), "slave", principal),
            )
        )
        buses[principal] = bus
        config = SlaveConfig(
            slave_id=sid,
            hostname=sid,
            resources=Resources(cpus=4, mem=1024),
            work_dir=work / sid,
            simulated_tasks=True,
            cluster=topics.cluster,
        )
        slave = Slave(bus, topics, config)
        await slave.start()
        stack.push_async_callback(slave.stop)
    return buses
