"""A slave's registration that ZooKeeper cannot take (review 54).

The slaves' records are kept in ZooKeeper many to a node (master.ha.zookeeper, BUCKETS),
and a slave's admission rewrites its bucket whole. Nothing bounds what a slave says its
hostname is (`Register.hostname: str`; a slave's message may be 8 MB), and the hostname
is in the record. A slave principal (a compromised slave host) registers a slave whose
hostname is 1.1 MB: the bucket's write is past ZooKeeper's packet limit (jute.maxbuffer,
1 MB), and ZooKeeper drops the leader's connection for it. A leader steps down the
moment its connection is suspended (docs/how-to/high-availability.md, "Fencing"), and
the record stays in the bucket the leader keeps, so its every later write of that bucket
does the same (an operator's slave of that bucket is refused, and costs it its term);
the slave's retries do it to the next leader. ZooKeeper's own server,
a master in process on it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from kazoo.client import KazooClient

from cluster.testing.zookeeper import ZooKeeperServer
from master.ha.registry import Registry
from master.ha.zookeeper import ZkStore, bucket_of
from master.master import Master
from protocol.wire.messages import Error, Register, Registered
from protocol.wire.resources import Resources

from conftest import need_zookeeper
from harness.helpers import eventually
from harness.master import FAST, GB, Cluster, T

pytestmark = pytest.mark.timeout(120)


@contextlib.asynccontextmanager
async def zookeeper_client() -> AsyncIterator[tuple[KazooClient, list[str]]]:
    """A client of a ZooKeeper of its own, and the states its connection went through."""
    need_zookeeper()
    async with ZooKeeperServer() as zk:
        client = KazooClient(hosts=zk.hosts, timeout=10)
        states: list[str] = []
        client.add_listener(lambda state: states.append(str(state)))
        await asyncio.to_thread(client.start)
        try:
            await asyncio.to_thread(client.ensure_path, "/election")
            await asyncio.to_thread(client.create, "/election/n1", b"")
            yield client, states
        finally:
            await asyncio.to_thread(client.stop)
            await asyncio.to_thread(client.close)


async def test_a_slaves_registration_too_big_for_zookeeper_costs_the_leader_nothing() -> None:
    async with zookeeper_client() as (client, states), contextlib.AsyncExitStack() as stack:
        registry = Registry(ZkStore(client, "/r", "/election/n1"))
        await registry.load()
        c = Cluster(stack)
        bus = await stack.enter_async_context(c.connect(name="master"))
        c.master = Master(bus, T, FAST, registry=registry)
        await c.master.start()
        stack.push_async_callback(c.master.stop)
        s1 = await c.slave("s1", Resources(cpus=1, mem=GB))
        await eventually(lambda: "s1" in c.master.books.slaves)
        assert states == ["CONNECTED"]

        await s1.bus.publish(  # a slave of the same principal, with a hostname of 1.1 MB
            s1.to_master,  # (as a hostile slave sends it: built past the model's bounds)
            Register.model_construct(
                slave_id="big",
                hostname="h" * 1_100_000,
                resources=Resources(cpus=1, mem=GB),
                incarnation=s1.bus.incarnation,
            ),
        )
        refused = await s1.inbox.wait_for(Error, lambda e: e.about == "Register", timeout=30)
        assert "hostname" in refused.message, refused
        assert "255" in refused.message, refused
        assert "big" not in c.master.books.slaves
        # an operator's slave that lands in the same bucket comes next, once ZooKeeper is
        # reached again: admitted
        await eventually(lambda: states[-1] == "CONNECTED", timeout=30)
        big = bucket_of("slave/big")
        same = next(f"n{i}" for i in range(10**6) if bucket_of(f"slave/n{i}") == big)
        honest = await c.slave(same, Resources(cpus=1, mem=GB))
        answers = (Registered, Error)
        await honest.inbox.wait_until(lambda: any(honest.inbox.of(k) for k in answers), 30)
        assert not honest.inbox.of(Error), honest.inbox.of(Error)
        # the leader's session with ZooKeeper was never in doubt: it did not step down
        assert states == ["CONNECTED"], states
