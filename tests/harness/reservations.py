"""A master, one slave and frameworks of given roles on a real broker, each started and
stopped by the test (a slave restarted on its work dir, a master failed over): the rig
the reservation and volume tests run on."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from master.master import Master
from protocol.tooling.brokers import MosquittoBroker
from protocol.transport.bus import Bus
from protocol.wire.messages import Offer
from protocol.wire.resources import Resources
from slave.slave import Slave, SlaveConfig

from harness.fakes import FakeFramework
from harness.slave import FAST, T

R = Resources.parse


@contextlib.asynccontextmanager
async def master(broker: MosquittoBroker, n: int = 0) -> AsyncIterator[Master]:
    async with Bus(
        broker.url, name="master", client_id=f"rtest-master-{n}", persistent=True
    ) as bus:
        m = Master(bus, T, FAST)
        await m.start()
        try:
            yield m
        finally:
            await m.stop()


@contextlib.asynccontextmanager
async def slave(
    broker: MosquittoBroker, tmp: Path, resources: str, **config: object
) -> AsyncIterator[Slave]:
    """Slave s1 on `tmp/s1`; `config`: more of its SlaveConfig (simulated tasks unless
    it says)."""
    async with Bus(
        broker.url,
        name="s1",
        client_id="rtest-s1",
        inbox=T.slave("slave", "s1"),
        persistent=True,
        will=(T.gone("slave", "slave"), "slave", "slave"),
    ) as bus:
        settings = SlaveConfig(
            slave_id="s1",
            hostname="s1.local",
            resources=R(resources),
            work_dir=tmp / "s1",
            cluster=T.cluster,
            **{"simulated_tasks": True, **config},  # type: ignore[arg-type]
        )
        s = Slave(bus, T, settings)
        await s.start()
        try:
            await s.registered.wait()
            yield s
        finally:
            await s.stop(kill_tasks=True)


@contextlib.asynccontextmanager
async def framework(
    broker: MosquittoBroker, name: str, role: str, **subscribe: object
) -> AsyncIterator[FakeFramework]:
    async with Bus(broker.url, name=name, inbox=T.framework("framework", name)) as bus:
        fw = FakeFramework(bus, T, name, acknowledging=True)
        await bus.subscribe(T.framework("framework", name), fw.receive)
        await fw.subscribe(name, role=role, failover_timeout=60, **subscribe)
        yield fw


async def offer_with(
    fw: FakeFramework,
    want: Resources,
    seen: int,
    timeout: float = 10.0,
    master: Master | None = None,
) -> Offer:
    """The first offer after the first `seen` holding `want`, declining the others; with
    `master`, passing over those it has rescinded (a slave restarted since they were made)."""
    while True:
        offer = await fw.next_offer(after=seen, timeout=timeout)
        seen += 1
        if master is not None and offer.offer_id not in master.books.offers:
            continue  # (rescinded: its Rescind may still be on its way)
        if offer.resources.contains(want):
            return offer
        await fw.decline(offer, refuse=0)
