"""A leader and its successor on one registry, on the memory transport with a credentials
store's ACL, and fake slaves and frameworks each on its principal's connection: the rig of
the tests of what comes back to a new leader (slaves' claims, reconciliation, removals)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from cluster.local.secure import provision
from master.ha.registry import MemoryStore, Registry
from master.master import Master, MasterConfig
from protocol.tooling.credentials import Store
from protocol.transport.memory import MemoryBroker
from protocol.wire.messages import Reregister, RunningTask
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics

from harness.fakes import FakeFramework, FakeSlave
from harness.helpers import eventually, held_on, open_transport

SLAVE = Resources(cpus=4, mem=1024)


@dataclass
class Failover:
    store: Store
    broker: MemoryBroker
    stack: contextlib.AsyncExitStack
    registry: MemoryStore
    topics: Topics
    master: Master

    async def start_master(self, name: str) -> Master:
        bus = await open_transport(self.stack, self.broker.connector("master"), name)
        registry = Registry(self.registry)
        await registry.load()
        config = MasterConfig(
            allocation_interval=0.05, heartbeat_interval=0.5, principals=self.store.principals_file
        )
        master = Master(bus, self.topics, config, registry=registry)
        await master.start()
        self.stack.push_async_callback(master.stop)
        return master

    async def fail_over(self) -> None:
        """The leader dies; a new one reads the registry and leads."""
        await self.master.stop()
        await self.master.bus.close()
        self.master = await self.start_master("master-2")

    async def slave(self, principal: str, slave_id: str) -> FakeSlave:
        """A fake slave of SLAVE, registered, on `principal`'s connection."""
        bus = await open_transport(
            self.stack, self.broker.connector(principal), slave_id, inbox=None
        )
        slave = FakeSlave(bus, self.topics, slave_id, SLAVE)
        await slave.register()
        await eventually(lambda: slave_id in self.master.books.slaves)
        return slave

    async def framework(self, principal: str) -> FakeFramework:
        """A fake framework on `principal`'s connection (not subscribed yet)."""
        bus = await open_transport(self.stack, self.broker.connector(principal), principal)
        fw = FakeFramework(bus, self.topics, "in")
        await bus.subscribe(self.topics.outbox("framework", principal) + "/#", fw.receive)
        return fw

    async def rounds_pass(self, n: int = 3) -> None:
        """Let `n` allocation rounds run (to show that something did *not* happen)."""
        target = self.master.offer_rounds.count + n
        await eventually(lambda: self.master.offer_rounds.count >= target)

    def held(self, slave_id: str) -> Resources:
        """What tasks hold of a slave (neither free nor offered)."""
        return held_on(self.master, slave_id)

    def registry_store_removed(self) -> set[str]:
        """The framework ids whose removal the registry's store holds."""
        return {k.partition("/")[2] for k in self.registry.entries if k.startswith("removed/")}


@contextlib.asynccontextmanager
async def failover_cluster(
    tmp_path: Path, principals: Sequence[tuple[str, ...]], topics: Topics
) -> AsyncIterator[Failover]:
    """The first leader, master-1, of a store of `principals` (name, kind)."""
    store = provision(tmp_path / "auth", principals)
    broker = MemoryBroker(store.principals.values())
    async with contextlib.AsyncExitStack() as stack:
        c = Failover(store, broker, stack, MemoryStore(), topics, None)  # type: ignore[arg-type]
        c.master = await c.start_master("master-1")
        yield c


async def reregister(slave: FakeSlave, tasks: list[RunningTask], owners: dict[str, str]) -> None:
    """`slave` re-registers on its connection, naming `tasks` and their `owners`."""
    await slave.bus.publish(
        slave.to_master,
        Reregister(
            slave_id=slave.slave_id,
            hostname=f"{slave.slave_id}.local",
            resources=slave.resources,
            incarnation=slave.bus.incarnation,
            tasks=tasks,
            owners=owners,
        ),
    )
