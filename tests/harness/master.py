"""A master in process over the in-memory transport, with fake slaves and frameworks."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import msgpack
import pytest

from master.ha.registry import Registry
from master.master import Master, MasterConfig
from protocol.tooling.credentials import Principal, Store
from protocol.transport.memory import MemoryBroker
from protocol.wire.codec import PROTOCOL_VERSION
from protocol.wire.discrete import EMPTY, Discrete
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics

from harness.fakes import FakeFramework, FakeSlave
from harness.helpers import eventually

T = Topics("mtest")


GB = 1024


FAST = MasterConfig(
    allocation_interval=0.05,
    heartbeat_interval=0.2,
    slave_timeout=60,
    status_retry=0.2,
    state_interval=0.05,
)


class Cluster:
    """A master and a way to add fake frameworks and slaves, all on one broker."""

    def __init__(self, stack: contextlib.AsyncExitStack) -> None:
        self.broker, self.stack = MemoryBroker(), stack
        self.connect = self.broker.connector(None)  # no credentials: any party, any topic
        self.master: Master

    async def start_master(
        self, config: MasterConfig = FAST, registry: Registry | None = None
    ) -> Master:
        """The master, on `registry` if given (a test's store under it)."""
        bus = await self.stack.enter_async_context(self.connect(name="master"))
        self.master = Master(bus, T, config, registry=registry)
        await self.master.start()
        self.stack.push_async_callback(self.master.stop)
        return self.master

    async def framework(
        self, name: str, *, principal: str | None = None, **subscribe: object
    ) -> FakeFramework:
        """A framework subscribed as `name`; `principal`: the one the broker proves it is
        (none: the unauthenticated `framework`)."""
        who = principal or "framework"
        connect = self.broker.connector(principal) if principal else self.connect
        bus = await self.stack.enter_async_context(
            connect(
                name=name,
                inbox=T.framework(who, name),
                will=(T.gone("framework", who), "framework", name),
            )
        )
        fw = FakeFramework(bus, T, name)
        await bus.subscribe(T.framework(who, name), fw.inbox)
        await fw.subscribe(name, **subscribe)
        return fw

    async def framework_new_process(self, inbox: str, framework_id: str) -> FakeFramework:
        """A framework's new process re-subscribing with its old framework id."""
        bus = await self.stack.enter_async_context(
            self.connect(name=inbox, inbox=T.framework("framework", inbox), will=None)
        )
        fw = FakeFramework(bus, T, inbox)
        await bus.subscribe(T.framework("framework", inbox), fw.inbox)
        await fw.subscribe("A", framework_id=framework_id, failover_timeout=30)
        return fw

    async def slave(
        self, slave_id: str, resources: Resources, discrete: Discrete = EMPTY
    ) -> FakeSlave:
        bus = await self.stack.enter_async_context(
            self.connect(name=slave_id, inbox=T.slave("slave", slave_id), will=None)
        )
        slave = FakeSlave(bus, T, slave_id, resources, discrete)
        await slave.register()
        return slave

    async def rounds_pass(self, n: int = 3) -> None:
        """Let `n` allocation rounds run (to show that something did *not* happen)."""
        target = self.master.offer_rounds.count + n
        await eventually(lambda: self.master.offer_rounds.count >= target)


def encode_raw(type_name: str, reply_to: str, body: dict[str, object]) -> bytes:
    """A message as the wire carries it, unchecked (what a buggy or hostile client sends)."""
    return msgpack.packb([PROTOCOL_VERSION, type_name, reply_to, body])  # type: ignore[no-any-return]


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        await c.start_master()
        yield c


@contextlib.asynccontextmanager
async def master_on(c: Cluster, registry: Registry, name: str) -> AsyncIterator[Master]:
    """A master `name` on `c`'s broker with `registry`, running meanwhile (one leader of
    a failover: the next one reads the same registry's store)."""
    bus = await c.stack.enter_async_context(c.connect(name=name))
    master = Master(bus, T, FAST, registry=registry)
    await master.start()
    try:
        yield master
    finally:
        await master.stop()


@contextlib.asynccontextmanager
async def acl_cluster(
    tmp_path: Path, grants: dict[str, dict[str, bool]], role: str
) -> AsyncIterator[Cluster]:
    """A master in process with a principals file: each principal of `grants` a
    framework's in `role`, with those operations granted (True) or taken away (False)."""
    store = Store(tmp_path / "store")
    store.path.mkdir()
    store.save({name: Principal(name, "framework", (role,)) for name in grants}, {})
    for name, operations in grants.items():
        for operation, allowed in operations.items():
            store.grant(name, operation, allowed)
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        await c.start_master(dataclasses.replace(FAST, principals=store.principals_file))
        yield c
