"""Review 57: the master's --max-failover-timeout says "a framework that disconnects holds
its tasks no longer than this" (master/cli.py; `Subscriptions._failover_timeout`: "a
framework that goes away does not hold its tasks, and so its share, for as long as it
likes"). A framework whose tasks came back as orphans -- the master restarted without its
registry, as the README's master runs -- holds them for ever: no timeout runs for an
orphan's framework (master/orphans.py: held "until that framework's principal
subscribes and takes them, an operator tears that framework down, their slave no longer
names them, or their slave is removed"), and what they hold counts in nobody's share.

So a tenant whose framework is orphaned by a restart need only not come back to it: its
tasks run on, on room nobody is charged for, and it subscribes a new framework that is
offered a full share beside them.

In process, on the memory transport with the credentials store's ACL (the fixtures of
tests/test_framework_ids.py, the master's --max-failover-timeout set to 1 s)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_framework_ids import PRINCIPALS, TASK, Cluster, T, run_tasks

from cluster.local.secure import provision
from master.master import Master, MasterConfig
from protocol.tooling.credentials import Store
from protocol.transport.base import Transport
from protocol.transport.memory import MemoryBroker
from protocol.wire.messages import ShutdownFramework
from protocol.wire.resources import Resources

from harness.fakes import FakeSlave
from harness.helpers import eventually, open_transport

pytestmark = pytest.mark.timeout(60)
MAX_FAILOVER = 1.0  # seconds: the operator's --max-failover-timeout
WAITED = 5.0  # seconds past it that the test waits for the orphans' shutdown


async def start_master(
    stack: contextlib.AsyncExitStack, broker: MemoryBroker, store: Store
) -> Master:
    bus: Transport = broker.connector("master")(name="master", inbox=None, will=None)
    await bus.start()
    stack.push_async_callback(bus.close)
    config = MasterConfig(
        allocation_interval=0.05,
        heartbeat_interval=0.5,
        principals=store.principals_file,
        max_failover_timeout=MAX_FAILOVER,
    )
    master = Master(bus, T, config)
    await master.start()
    stack.push_async_callback(master.stop)
    return master


class CappedCluster(Cluster):
    async def restart_master(self) -> None:
        await self.master.stop()
        await self.master.bus.close()
        self.master = await start_master(self.stack, self.broker, self.store)


@contextlib.asynccontextmanager
async def cluster(tmp_path: Path) -> AsyncIterator[CappedCluster]:
    store = provision(tmp_path / "auth", PRINCIPALS)
    broker = MemoryBroker(store.principals.values())
    async with contextlib.AsyncExitStack() as stack:
        master = await start_master(stack, broker, store)
        bus = await open_transport(
            stack, broker.connector("slave-a"), "sa", inbox=T.outbox("slave", "slave-a")
        )
        slave = FakeSlave(bus, T, "sa", Resources(cpus=4, mem=1024))
        await slave.register()
        await eventually(lambda: "sa" in master.books.slaves)
        yield CappedCluster(store, broker, stack, master, slave)


async def test_an_orphaned_framework_holds_its_tasks_no_longer_than_the_most_failover(
    tmp_path: Path,
) -> None:
    """mallory runs 3 tasks, asking a failover timeout of an hour (cut to 1 s). The master
    restarts without its registry; the slave brings her tasks back, orphans; she never
    comes back to that framework. Within the most failover timeout (and WAITED more) the
    slave must be told to shut it down and its room freed, as for any framework gone that
    long: today nothing happens, and her 3 tasks hold 3 CPUs that count to nobody."""
    async with cluster(tmp_path) as c:
        mallory = await c.framework("mallory")
        mid = (await mallory.subscribe("m", role="mallory", failover_timeout=3600)).framework_id
        await run_tasks(c, mallory, 3)
        await c.restart_master()
        await c.reregister()
        assert c.master.books.orphans.owners(mid) == {"mallory"}
        assert c.held("sa") == TASK.scaled(3)

        shutdowns = len(c.slave.inbox.of(ShutdownFramework))

        def told() -> bool:
            return any(
                s.framework_id == mid for s in c.slave.inbox.of(ShutdownFramework)[shutdowns:]
            )

        async def heartbeats() -> None:  # (the slave stays: a live one heartbeats)
            while True:
                await c.slave.heartbeat()
                await asyncio.sleep(0.2)

        beating = asyncio.create_task(heartbeats())
        try:
            with contextlib.suppress(TimeoutError):
                await c.slave.inbox.wait_until(told, timeout=MAX_FAILOVER + WAITED)
            held = c.held("sa")
        finally:
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating
        assert held == Resources(), (
            f"{MAX_FAILOVER + WAITED:g} s after the restart mallory's orphaned framework "
            f"{mid} still holds {held} of the slave (counted in nobody's share), with a most "
            f"failover timeout of {MAX_FAILOVER:g} s"
        )
