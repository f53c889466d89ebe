"""Registrations in a storm, as Mesos's registrar takes them: the master reads on while a
new slave's record is written, the records that arrive together share a write (one
ZooKeeper transaction), and a slave is told Registered only once its record is durable."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import msgpack
import pytest
from kazoo.exceptions import ConnectionLoss, NodeExistsError, NoNodeError, RolledBackError

from master.ha import registry as registry_module
from master.ha.registry import FrameworkRecord, MemoryStore, RecordTooLarge, Registry
from master.ha.zookeeper import (
    BUCKETED,
    BUCKETS,
    MAX_NODE_BYTES,
    MAX_TRANSACTION_BYTES,
    Fenced,
    ZkStore,
    bucket_of,
)
from master.master import Master
from protocol.transport.base import Transport
from protocol.transport.memory import MemoryBroker
from protocol.wire.messages import Heartbeat, Register, Registered
from protocol.wire.resources import Resources

from harness.helpers import Inbox, eventually
from harness.master import FAST, T


class GatedStore(MemoryStore):
    """A store whose writes wait for `gate`: a slow registry (ZooKeeper far away)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.gate.set()
        self.waiting: list[str] = []

    async def put(self, key: str, value: Any) -> None:
        self.waiting.append(key)
        await self.gate.wait()
        self.waiting.remove(key)
        await super().put(key, value)


@contextlib.asynccontextmanager
async def master_on(store: GatedStore) -> AsyncIterator[tuple[Master, Transport, Inbox]]:
    broker = MemoryBroker()
    connect = broker.connector(None)
    async with (
        connect(name="master") as master_bus,
        connect(name="slaves", inbox=T.slave("slave", "+")) as slaves,
    ):
        master = Master(master_bus, T, FAST, registry=Registry(store))
        await master.start()
        inbox = Inbox()
        await slaves.subscribe(T.slave("slave", "+"), inbox)
        try:
            yield master, slaves, inbox
        finally:
            await master.stop()


def register(slave_id: str) -> Register:
    return Register(slave_id=slave_id, hostname=f"{slave_id}.local", resources=Resources(cpus=1))


async def test_the_master_reads_on_while_records_are_written_and_answers_after() -> None:
    store = GatedStore()
    async with master_on(store) as (master, slaves, inbox):
        to_master = T.inbound("slave", "slave")
        await slaves.publish(to_master, register("early"))
        await inbox.wait_for(Registered, lambda m: m.slave_id == "early")
        store.gate.clear()  # the registry is slow from here on
        ids = [f"s{i:03}" for i in range(50)]
        for slave_id in ids:
            await slaves.publish(to_master, register(slave_id))
        heard = master.books.slaves["early"].last_seen
        await asyncio.sleep(0.01)
        await slaves.publish(to_master, Heartbeat(source="early"))
        # every record asked for at once: the master did not wait on one to read the next
        await eventually(lambda: len(store.waiting) == len(ids))
        await eventually(lambda: master.books.slaves["early"].last_seen > heard)  # read on
        assert not any(s in master.books.slaves for s in ids)
        assert [m.slave_id for m in inbox.of(Registered)] == ["early"]  # nobody told early
        store.gate.set()
        await eventually(lambda: len(inbox.of(Registered)) == len(ids) + 1)
        assert all(s in master.books.slaves for s in ids)
        assert all(f"slave/{s}" in store.entries for s in ids)
        # registered again (a failover's Reregister, a retry): nothing to write, answered now
        store.gate.clear()
        await slaves.publish(to_master, register("s000"))
        await eventually(lambda: len(inbox.of(Registered)) == len(ids) + 2)
        assert not store.waiting


async def test_a_retry_of_a_registration_being_written_waits_for_the_first_answer() -> None:
    """A slave that asks again while its record is being written (a storm outran the
    registry) is answered once, with one write: at 100,000 slaves the leader read a
    quarter more Registers than slaves, each another write of its bucket. A Register
    that says something else (another incarnation: the slave reconnected) is not the
    same ask, and is written and answered too."""
    store = GatedStore()
    async with master_on(store) as (master, slaves, inbox):
        to_master = T.inbound("slave", "slave")
        store.gate.clear()
        await slaves.publish(to_master, register("s1"))
        await eventually(lambda: store.waiting == ["slave/s1"])
        for _ in range(3):  # its retries
            await slaves.publish(to_master, register("s1"))
        await eventually(lambda: master.messages.received["Register"] == 4)
        assert store.waiting == ["slave/s1"]  # one write
        assert master.churn.retries_absorbed == 3
        reconnected = register("s1").model_copy(update={"incarnation": "another"})
        await slaves.publish(to_master, reconnected)
        await eventually(lambda: store.waiting == ["slave/s1", "slave/s1"])
        store.gate.set()
        await eventually(lambda: "s1" in master.books.slaves)
        await eventually(lambda: len(inbox.of(Registered)) == 2)  # the first, the other
        assert master.books.slaves["s1"].incarnation == "another"
        await asyncio.sleep(0.1)  # (what else would come: nothing)
        assert len(inbox.of(Registered)) == 2


class FakeZk:
    """What ZkStore uses of kazoo: multi-op transactions, all or nothing."""

    def __init__(self) -> None:
        self.nodes: dict[str, bytes] = {}
        self.commits: list[int] = []  # ops in each transaction, the fence's check left out
        self.sent: list[int] = []  # each transaction's bytes of paths and data
        self.fenced = False
        self.drops = 0  # transactions to come that lose the connection (nothing written)

    def transaction(self) -> FakeTransaction:
        return FakeTransaction(self)

    def ensure_path(self, path: str) -> None:
        pass

    def get_children(self, path: str) -> list[str]:
        return [n.removeprefix(path + "/") for n in self.nodes if n.startswith(path + "/")]

    def get_async(self, path: str) -> Any:
        data = self.nodes[path]

        class Result:
            def get(self, timeout: float) -> tuple[bytes, None]:
                return data, None

        return Result()


class FakeTransaction:
    def __init__(self, zk: FakeZk) -> None:
        self.zk, self.ops = zk, list[tuple[str, str, bytes | None]]()

    def check(self, path: str, version: int) -> None:
        self.ops.append(("check", path, None))

    def create(self, path: str, data: bytes) -> None:
        self.ops.append(("create", path, data))

    def set_data(self, path: str, data: bytes) -> None:
        self.ops.append(("set", path, data))

    def delete(self, path: str) -> None:
        self.ops.append(("delete", path, None))

    def commit(self) -> list[Any]:
        self.zk.commits.append(len(self.ops) - 1)
        self.zk.sent.append(sum(len(path) + len(data or b"") for _, path, data in self.ops))
        if self.zk.drops:  # (as ZooKeeper past its jute.maxbuffer: the connection dropped)
            self.zk.drops -= 1
            raise ConnectionLoss()
        nodes, results = dict(self.zk.nodes), list[Any]()
        for op, path, data in self.ops:
            result: Any = True
            if op == "check" and self.zk.fenced:
                result = NoNodeError()
            elif op == "create" and path in nodes:
                result = NodeExistsError()
            elif op in ("set", "delete") and path not in nodes:
                result = NoNodeError()
            elif op in ("create", "set"):
                assert data is not None
                nodes[path] = data
            elif op == "delete":
                del nodes[path]
            results.append(result)
        if any(isinstance(r, Exception) for r in results):
            return [r if isinstance(r, Exception) else RolledBackError() for r in results]
        self.zk.nodes = nodes
        return results


def zk_store() -> tuple[ZkStore, FakeZk]:
    zk = FakeZk()
    return ZkStore(zk, "/r", "/election/n1"), zk  # type: ignore[arg-type]


async def test_writes_asked_for_together_are_one_zookeeper_transaction() -> None:
    store, zk = zk_store()
    await asyncio.gather(*(store.put(f"framework/f{i}", {"principal": "p"}) for i in range(1200)))
    assert zk.commits == [500, 500, 200]  # MAX_BATCH a transaction
    assert len(zk.nodes) == 1200
    await asyncio.gather(
        store.put("framework/f1", {"principal": "q"}),
        store.drop("framework/f2"),
        store.drop("framework/nx"),
    )
    assert zk.commits[3:] == [2]  # a set and a delete; a key never written is not dropped
    assert "/r/framework%2Ff2" not in zk.nodes


async def test_slaves_records_are_read_as_a_few_thousand_nodes_however_many_slaves() -> None:
    """A new leader reads the registry before it serves: 100,000 slaves' records, one node
    each, took it half a minute. They are kept many to a node (BUCKETS), written together
    when admitted together, and read back whole; a record written one to a node (before
    buckets) is read too, and moves into its bucket the next time it is written."""
    store, zk = zk_store()
    zk.nodes["/r/slave%2Fold"] = msgpack.packb({"principal": "p", "hostname": "old"})
    zk.nodes["/r/slave%2Fgone"] = msgpack.packb({"principal": "p", "hostname": "gone"})
    assert (await store.load()).keys() == {"slave/old", "slave/gone"}
    await asyncio.gather(*(store.put(f"slave/s{i}", {"principal": "p"}) for i in range(5000)))
    assert len(zk.nodes) <= BUCKETS + 2
    assert len(zk.commits) < 5000 / 100  # (transactions, each of many records)
    await asyncio.gather(
        store.put("slave/old", {"principal": "p", "hostname": "moved"}),
        store.drop("slave/gone"),
        store.drop("slave/s7"),
    )
    assert "/r/slave%2Fold" not in zk.nodes
    assert "/r/slave%2Fgone" not in zk.nodes
    again = zk_store_on(zk)  # the next leader, on the same nodes
    entries = await again.load()
    assert entries.keys() == {f"slave/s{i}" for i in range(5000) if i != 7} | {"slave/old"}
    assert entries["slave/old"] == {"principal": "p", "hostname": "moved"}
    await again.drop("slave/old")  # (the next leader writes to the buckets it read)
    assert "slave/old" not in await zk_store_on(zk).load()
    assert len(await zk_store_on(zk).load()) == 4999


def zk_store_on(zk: FakeZk) -> ZkStore:
    return ZkStore(zk, "/r", "/election/n1")  # type: ignore[arg-type]


async def test_a_batch_that_fails_in_part_is_written_one_at_a_time() -> None:
    store, zk = zk_store()
    zk.nodes["/r/framework%2Fold"] = b"made by an earlier leader"
    await asyncio.gather(
        *(store.put(f"framework/{k}", {"principal": "p"}) for k in ("a", "old", "b"))
    )
    # the batch rolled back on `old`; then a, old (create: exists; set), b
    assert zk.commits == [3, 1, 1, 1, 1]
    assert len(zk.nodes) == 3


async def test_a_deposed_leader_writes_nothing_and_every_caller_hears_it() -> None:
    store, zk = zk_store()
    zk.fenced = True
    results = await asyncio.gather(
        *(store.put(f"slave/s{i}", {"principal": "p"}) for i in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, Fenced) for r in results)
    assert not zk.nodes
    with pytest.raises(Fenced):
        await store.put("slave/x", {})


def same_bucket(key: str, n: int) -> list[str]:
    """`n` slaves' keys whose records share `key`'s bucket."""
    found = (f"slave/n{i}" for i in range(10**6))
    return [k for k in found if bucket_of(k) == bucket_of(key)][:n]


async def test_a_record_its_bucket_cannot_hold_is_refused_alone() -> None:
    """A write that would put a node past MAX_NODE_BYTES (ZooKeeper drops a connection
    whose request is past 1 MB: a leader's term) is refused, not sent; the records
    asked for with it, of the same bucket, are written."""
    store, zk = zk_store()
    with pytest.raises(RecordTooLarge):  # one record over the bound on its own
        await store.put("slave/huge", {"hostname": "h" * MAX_NODE_BYTES})
    assert zk.commits == []
    a, b, c = same_bucket("slave/huge", 3)
    half = {"hostname": "h" * (MAX_NODE_BYTES // 2)}
    results = await asyncio.gather(
        store.put(a, half), store.put(b, half), store.put(c, {"hostname": "c"}),
        return_exceptions=True,
    )  # fmt: skip
    assert results[0] is None
    assert results[2] is None
    assert isinstance(results[1], RecordTooLarge), results
    assert all(size <= MAX_NODE_BYTES for size in map(len, zk.nodes.values()))
    assert (await zk_store_on(zk).load()).keys() == {a, c}


async def test_a_failed_write_leaves_its_bucket_as_last_written() -> None:
    """The leader keeps each bucket as ZooKeeper has it: a record whose write failed is
    not in the next write of its bucket (it would fail that one too, or be kept unasked)."""
    store, zk = zk_store()
    a, b, c = same_bucket("slave/a", 3)
    await store.put(a, {"principal": "p"})
    zk.drops = 1
    with pytest.raises(ConnectionLoss):
        await store.put(b, {"principal": "p"})
    await store.put(c, {"principal": "p"})
    assert (await zk_store_on(zk).load()).keys() == {a, c}


async def test_a_transaction_stays_under_zookeepers_packet_limit() -> None:
    """Records of 100 KB each, asked for together: each transaction holds what fits in
    MAX_TRANSACTION_BYTES (counted before a write joins it), never one past it."""
    store, zk = zk_store()
    big = {"name": "n" * 100_000}
    await asyncio.gather(*(store.put(f"framework/f{i}", big) for i in range(30)))
    assert len(zk.nodes) == 30
    assert max(zk.sent) <= MAX_TRANSACTION_BYTES < 1024 * 1024
    assert sum(zk.commits) == 30
    assert len(zk.commits) >= 30 * 100_000 // MAX_TRANSACTION_BYTES


async def test_removed_frameworks_are_kept_boundedly_in_a_few_nodes_and_read_oldest_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A framework's removal outlives its leader (a new one refuses it as removed, and shuts
    its tasks down where a slave brings them back): kept beside the framework's record
    dropped, at most REMOVED_KEPT of them (the oldest forgotten), in a few bucket nodes,
    and read back oldest first."""
    monkeypatch.setattr(registry_module, "REMOVED_KEPT", 300)
    store, zk = zk_store()
    registry = Registry(store)
    for i in range(400):
        await registry.add_framework(f"f{i}", FrameworkRecord(principal="alice"))
    for i in range(400):
        await registry.remove_framework(f"f{i}", "alice", f"torn down ({i})")
    assert len(zk.nodes) <= BUCKETED["removed/"] + 2
    again = Registry(zk_store_on(zk))
    await again.load()
    assert not again.frameworks
    assert list(again.removed) == [f"f{i}" for i in range(100, 400)]
    assert again.removed["f399"].why == "torn down (399)"
    assert again.removed["f399"].principal == "alice"


async def test_one_principals_removals_push_out_only_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """bob's framework removed, then alice removes more than REMOVED_KEPT of hers: bob's
    removal stands, in the registry and read back by the next leader."""
    monkeypatch.setattr(registry_module, "REMOVED_KEPT", 50)
    store, zk = zk_store()
    registry = Registry(store)
    await registry.remove_framework("bobs", "bob", "torn down by an operator")
    for i in range(120):
        await registry.remove_framework(f"f{i}", "alice", "torn down")
    assert "bobs" in registry.removed
    again = Registry(zk_store_on(zk))
    await again.load()
    assert again.removed["bobs"].principal == "bob"
    assert [f for f in again.removed if f != "bobs"] == [f"f{i}" for i in range(70, 120)]


async def test_removals_past_the_bound_left_by_a_lost_leader_are_forgotten_on_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A leader lost between a removal's write and the trim of the oldest leaves one too
    many: the next leader forgets it as it reads, in its books and in ZooKeeper alike."""
    monkeypatch.setattr(registry_module, "REMOVED_KEPT", 5)
    store, zk = zk_store()
    registry = Registry(store)
    for i in range(5):
        await registry.remove_framework(f"f{i}", "alice", "torn down")
    # the write of a sixth removal, its leader lost before the trim
    await store.put(
        "removed/f5", registry.removed["f4"].model_copy(update={"at": 1e12}).model_dump(mode="json")
    )
    again = Registry(zk_store_on(zk))
    await again.load()
    assert list(again.removed) == [f"f{i}" for i in range(1, 6)]
    third = Registry(zk_store_on(zk))
    await third.load()
    assert list(third.removed) == [f"f{i}" for i in range(1, 6)]
