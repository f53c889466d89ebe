"""Framework ids are the master's to give, and orphans keep their owner (issue 45).

On a secured cluster a new framework does not choose its id: the master gives one that
proves whose it is (master.framework_ids), so that a master restarted without its books
(no --work-dir, as the README's example runs it) lets each principal back with its own
id and nobody with another's. A re-registering slave says whose each framework's tasks
are (`Reregister.owners`, from the principal the launch named): only that principal's
framework gets them, whether it comes back before the slave or after.

In process, on the memory transport with the credentials store's ACL; the slave is a
bare protocol speaker (tests/fakes.py) that reports, as a real one does, the owners the
master named in its launches.
"""

from __future__ import annotations

import contextlib
import json
import string
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given
from hypothesis import strategies as st

from cluster.local.secure import as_principal, provision
from cluster.local.view import wait_state
from frameworks.driver import SchedulerDriver
from frameworks.errors import SubscribeRefused
from frameworks.scheduler import build_task
from master.framework_ids import KEY_FILE, FrameworkIds, cluster_key
from master.master import Master, MasterConfig
from master.mesos_api.classic import ClassicEndpoints
from master.mesos_api.doors import master_side
from protocol.tooling.credentials import Store
from protocol.transport.base import Transport
from protocol.transport.memory import MemoryBroker
from protocol.wire.messages import (
    CommandInfo,
    Error,
    ExecutorInfo,
    Reregister,
    RunningTask,
    RunTask,
    ShutdownFramework,
    State,
    Subscribe,
    TaskState,
    Teardown,
)
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics

from conftest import need_mosquitto
from harness.fakes import FakeFramework, FakeSlave
from harness.helpers import Recorder, eventually, held_on, open_transport, secure_cluster

T = Topics("ids")
PRINCIPALS = [
    ("master", "master"),
    ("slave-a", "slave"),
    ("alice", "framework"),
    ("mallory", "framework"),
    ("ops", "operator"),
]
TASK = Resources(cpus=1, mem=64)
EXEC = Resources(cpus=0.5, mem=32)
pytestmark = pytest.mark.timeout(60)


# -- the ids themselves --------------------------------------------------------------------


NAMES = st.text(string.ascii_letters + string.digits + "_.-", min_size=1, max_size=64)


@given(NAMES, NAMES, st.binary(min_size=32, max_size=32))
def test_an_id_is_its_principals_and_nobody_elses(given_to: str, other: str, key: bytes) -> None:
    ids = FrameworkIds(key)
    framework_id = ids.new(given_to)
    assert ids.given_to(framework_id, given_to)
    assert ids.given_to(framework_id, other) == (other == given_to)
    another = FrameworkIds(bytes(b ^ 1 for b in key))  # another cluster's
    assert not another.given_to(framework_id, given_to)
    head, _, tag = framework_id.rpartition("-")
    forged = f"{head}-{'0' * len(tag)}"
    assert not ids.given_to(forged, given_to)
    for made_up in ("fw-1", f"{head}-", head, f"fw-x-{tag}", f"{framework_id}0", ""):
        assert not ids.given_to(made_up, given_to)


def test_an_insecure_cluster_proves_nothing_and_says_nothing_wrong() -> None:
    ids = FrameworkIds(None)
    assert ids.new("a").startswith("fw-")
    assert ids.given_to("anything-at-all", "a")


def test_the_key_is_made_once_beside_the_store_and_read_by_every_master(tmp_path: Path) -> None:
    path = tmp_path / KEY_FILE
    first = cluster_key(path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert cluster_key(path) == first  # another master, or this one restarted
    assert [p.name for p in tmp_path.iterdir()] == [KEY_FILE]  # nothing left aside
    path.write_text("not hex\n")
    with pytest.raises(ValueError, match="not a key"):
        cluster_key(path)


# -- on a cluster ---------------------------------------------------------------------------


@dataclass
class Cluster:
    store: Store
    broker: MemoryBroker
    stack: contextlib.AsyncExitStack
    master: Master
    slave: FakeSlave
    settings: Mapping[str, Any] = field(default_factory=dict)  # more of the MasterConfig

    async def framework(self, principal: str, inbox: str = "in") -> FakeFramework:
        bus = await open_transport(self.stack, self.broker.connector(principal), principal)
        fw = FakeFramework(bus, T, inbox)
        await bus.subscribe(T.outbox("framework", principal) + "/#", fw.receive)
        return fw

    async def restart_master(self) -> None:
        """A master without --work-dir stopped and started again: no books at all."""
        await self.master.stop()
        await self.master.bus.close()
        self.master = await start_master(self.stack, self.broker, self.store, self.settings)

    async def reregister(
        self, owners: dict[str, str] | None = None, runs: list[RunTask] | None = None
    ) -> None:
        """The slave comes back with what runs there (by default every task launched
        there), and whose it says each framework is (by default what the launches said,
        as a real slave checkpoints it)."""
        runs = self.slave.runs() if runs is None else runs
        said = {r.framework_id: r.principal for r in runs if r.principal}
        await self.slave.bus.publish(
            self.slave.to_master,
            Reregister(
                slave_id=self.slave.slave_id,
                hostname="sa.local",
                resources=self.slave.resources,
                incarnation=self.slave.bus.incarnation,
                tasks=[
                    RunningTask(
                        framework_id=r.framework_id,
                        task=r.task,
                        state=TaskState.RUNNING,
                        proof=r.proof,  # (as the launch gave it)
                    )
                    for r in runs
                ],
                owners=said if owners is None else owners,
            ),
        )
        await eventually(lambda: self.slave.slave_id in self.master.books.slaves)

    def in_use(self, framework_id: str) -> Resources:
        """What the allocator holds for a framework's tasks (not its offers)."""
        books = self.master.books
        offered = sum(
            (o.resources for o in books.offers.values() if o.framework_id == framework_id),
            Resources(),
        )
        return self.master.allocator.allocation(framework_id).subtract_clamped(offered)

    def held(self, slave_id: str) -> Resources:
        """What tasks hold of a slave, anybody's or nobody's (neither free nor offered)."""
        return held_on(self.master, slave_id)

    def running(self, framework_id: str) -> int:
        fw = self.master.books.frameworks.get(framework_id)
        return 0 if fw is None else len(fw.tasks)


async def start_master(
    stack: contextlib.AsyncExitStack,
    broker: MemoryBroker,
    store: Store,
    settings: Mapping[str, Any] | None = None,
) -> Master:
    """A master on the memory broker; `settings`: more of its MasterConfig."""
    bus: Transport = broker.connector("master")(name="master", inbox=None, will=None)
    await bus.start()
    stack.push_async_callback(bus.close)
    config = MasterConfig(
        allocation_interval=0.05,
        heartbeat_interval=0.5,
        principals=store.principals_file,
        **(settings or {}),
    )
    master = Master(bus, T, config)
    await master.start()
    stack.push_async_callback(master.stop)
    return master


@contextlib.asynccontextmanager
async def cluster(tmp_path: Path, **settings: Any) -> AsyncIterator[Cluster]:
    """A master (`settings`: more of its MasterConfig, kept across its restarts) and one
    fake slave, on the memory broker with the credentials store's ACL."""
    store = provision(tmp_path / "auth", PRINCIPALS)
    broker = MemoryBroker(store.principals.values())
    async with contextlib.AsyncExitStack() as stack:
        master = await start_master(stack, broker, store, settings)
        bus = await open_transport(
            stack, broker.connector("slave-a"), "sa", inbox=T.outbox("slave", "slave-a")
        )
        slave = FakeSlave(bus, T, "sa", Resources(cpus=4, mem=1024))
        await slave.register()
        await eventually(lambda: "sa" in master.books.slaves)
        yield Cluster(store, broker, stack, master, slave, settings)


async def run_tasks(c: Cluster, fw: FakeFramework, n: int) -> list[RunTask]:
    offer = await fw.next_offer()
    await fw.accept(offer, [fw.task(offer, TASK, f"t{i}") for i in range(n)])
    runs = [await c.slave.run_task() for _ in range(n)]
    await eventually(lambda: c.running(fw.framework_id) == n)
    return runs


async def refused(fw: FakeFramework, subscribe: Subscribe) -> Error:
    seen = len(fw.inbox.of(Error))
    await fw.bus.publish(fw.to_master, subscribe)
    return (await fw.inbox.wait_count(Error, seen + 1))[seen]


async def test_the_master_gives_ids_and_a_framework_cannot_choose_one(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        mallory = await c.framework("mallory")
        chosen = await refused(mallory, Subscribe(name="m", inbox="in", framework_id="fw-mine"))
        assert chosen.code == "subscribe-refused"
        assert "fw-mine" not in c.master.books.frameworks
        given = await mallory.subscribe("m", role="mallory")
        assert not given.resubscribed
        ids = c.master.framework_ids
        assert ids.given_to(given.framework_id, "mallory")
        assert not ids.given_to(given.framework_id, "alice")


async def test_a_launch_names_the_frameworks_principal(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        alice = await c.framework("alice")
        await alice.subscribe("a", role="alice")
        runs = await run_tasks(c, alice, 2)
        assert {r.principal for r in runs} == {"alice"}


async def test_after_a_restart_without_books_orphans_go_back_to_their_owner_only(
    tmp_path: Path,
) -> None:
    """The issue's attack: the master restarted without --work-dir, mallory subscribed with
    alice's framework id and was given her 3 running tasks. Now it is refused in the same
    words as for an id nobody has, before the slave is back and after, and alice comes
    back to her tasks."""
    async with cluster(tmp_path) as c:
        alice = await c.framework("alice")
        fid = (await alice.subscribe("a", role="alice", failover_timeout=60)).framework_id
        await run_tasks(c, alice, 3)
        await c.restart_master()
        mallory = await c.framework("mallory", inbox="m2")
        nobodys = FrameworkIds(bytes(32)).new("mallory")  # (a made-up id, well formed)

        async def claim(framework_id: str) -> str:
            subscribe = Subscribe(name="m", role="mallory", inbox="m2", framework_id=framework_id)
            error = await refused(mallory, subscribe)
            assert error.code == "subscribe-refused"
            return error.message.replace(framework_id, "X")

        assert await claim(fid) == await claim(nobodys)  # before the slave is back
        await c.reregister()
        assert c.master.books.orphans.owners(fid) == {"alice"}
        # an operator sees them in the classic state, as Mesos lists orphans
        state = await classic_state(c.master)
        assert sorted(t["framework_id"] for t in state["orphan_tasks"]) == [fid] * 3
        assert state["unregistered_frameworks"] == [fid]
        assert await claim(fid) == await claim(nobodys)  # and after
        assert fid not in c.master.books.frameworks

        back = await c.framework("alice", inbox="in2")
        again = await back.subscribe("a", role="alice", framework_id=fid)
        assert (again.framework_id, again.resubscribed) == (fid, True)
        await eventually(lambda: c.running(fid) == 3)
        assert c.in_use(fid) == TASK.scaled(3)
        assert not c.master.books.orphans


async def test_a_framework_back_before_its_slave_gets_only_what_the_slave_says_is_its(
    tmp_path: Path,
) -> None:
    """alice comes back first, with her own id, and is accepted; the slave then says whose
    each framework's tasks are: alice's are hers, and tasks the slave says are another
    principal's are not given to the framework that has that id now."""
    async with cluster(tmp_path) as c:
        alice = await c.framework("alice")
        fid = (await alice.subscribe("a", role="alice", failover_timeout=60)).framework_id
        mallory = await c.framework("mallory")
        mid = (await mallory.subscribe("m", role="mallory", failover_timeout=60)).framework_id
        await run_tasks(c, alice, 2)
        await run_tasks(c, mallory, 1)
        await c.restart_master()
        for fw, framework_id in ((alice, fid), (mallory, mid)):
            fw.inbox.messages.clear()
            await fw.subscribe("x", role=fw.principal, framework_id=framework_id)
        # the slave says mallory's framework's task is alice's: not mallory's to have
        await c.reregister(owners={fid: "alice", mid: "alice"})
        await eventually(lambda: c.running(fid) == 2)
        assert c.running(mid) == 0
        assert c.master.books.orphans.owners(mid) == {"alice"}
        assert c.in_use(mid) == Resources()
        assert c.held("sa") == TASK.scaled(3)  # (its task still holds what it uses)
        # and a later subscribe of that id by its principal does not take it either
        await c.restart_master()
        await c.reregister(owners={mid: "alice"})
        error = await refused(
            mallory, Subscribe(name="m", role="mallory", inbox="in", framework_id=mid)
        )
        assert error.code == "subscribe-refused"
        assert mid not in c.master.books.frameworks


async def test_a_framework_torn_down_while_its_slave_was_away_holds_nothing_there_after(
    tmp_path: Path,
) -> None:
    """The slave missed the ShutdownFramework (away when alice's framework was torn
    down). When it comes back naming her tasks, it is told again, and nothing of the slave
    is held for a framework that can never come for it: it is all offered again."""
    async with cluster(tmp_path) as c:
        alice = await c.framework("alice")
        fid = (await alice.subscribe("a", role="alice")).framework_id
        await run_tasks(c, alice, 3)
        await alice.bus.publish(alice.to_master, Teardown(framework_id=fid))
        await eventually(lambda: fid in c.master.books.removed)
        shutdowns = len(c.slave.inbox.of(ShutdownFramework))
        await c.reregister()  # (the fake slave kills nothing: it names all 3 again)
        told = await c.slave.inbox.wait_count(ShutdownFramework, shutdowns + 1)
        assert told[-1].framework_id == fid
        assert not c.master.books.orphans
        # (held as dying until the slave says its tasks have ended: the fake, at once)
        await eventually(lambda: c.held("sa") == Resources())
        mallory = await c.framework("mallory")
        await mallory.subscribe("m", role="mallory")
        offer = await mallory.next_offer()
        assert offer.resources == c.slave.resources  # the whole slave, not 3 tasks less


async def test_an_operator_tears_down_a_framework_known_only_by_its_orphaned_tasks(
    tmp_path: Path,
) -> None:
    """After a restart without books, alice's tasks came back with the slave and she did
    not: held by nobody, they would hold their share of the slave for ever. An operator
    tears her framework down by id, as Mesos's operators do a recovered framework's: the
    slave is told to shut it down, the slave is all free, and the id is removed."""
    async with cluster(tmp_path) as c:
        alice = await c.framework("alice")
        fid = (await alice.subscribe("a", role="alice", failover_timeout=60)).framework_id
        await run_tasks(c, alice, 2)
        await c.restart_master()
        await c.reregister()
        assert c.held("sa") == TASK.scaled(2)
        bus = await open_transport(c.stack, c.broker.connector("ops"), "ops", inbox=None)
        shutdowns = len(c.slave.inbox.of(ShutdownFramework))
        await bus.publish(T.inbound("operator", "ops"), Teardown(framework_id=fid))
        told = await c.slave.inbox.wait_count(ShutdownFramework, shutdowns + 1)
        assert told[-1].framework_id == fid
        assert not c.master.books.orphans
        # (held by nobody until the slave says its tasks have ended: the fake, at once)
        await eventually(lambda: c.held("sa") == Resources())
        assert c.master.books.removed[fid][0] == "alice"
        again = Subscribe(name="a", role="alice", inbox="in", framework_id=fid)
        error = await refused(alice, again)
        assert error.code == "framework-removed"


async def test_an_orphan_its_slave_no_longer_names_holds_nothing(tmp_path: Path) -> None:
    """After a restart without books, alice's 3 tasks came back as orphans; one ended while
    she was away, and the slave, registering again, names only the other 2: the ended
    one's resources are free again, not held by nobody until she comes back."""
    async with cluster(tmp_path) as c:
        alice = await c.framework("alice")
        await alice.subscribe("a", role="alice", failover_timeout=60)
        runs = await run_tasks(c, alice, 3)
        await c.restart_master()
        await c.reregister()
        assert c.held("sa") == TASK.scaled(3)
        await c.reregister(runs=runs[1:])
        await eventually(lambda: c.held("sa") == TASK.scaled(2))
        assert sorted(o.task.task_id for o in c.master.books.orphans) == ["t1", "t2"]


async def test_an_executors_hold_passes_to_an_orphan_still_running_in_it(
    tmp_path: Path,
) -> None:
    """alice's t0 and t1 run in one executor of her own (its resources held once, with the
    first). After a restart without books t0 ends while she is away: the executor runs on
    for t1 and stays held; once t1 is gone too, the slave is all free."""
    async with cluster(tmp_path) as c:
        alice = await c.framework("alice")
        await alice.subscribe("a", role="alice", failover_timeout=60)
        offer = await alice.next_offer()
        executor = ExecutorInfo(executor_id="e", command=CommandInfo(value="x"), resources=EXEC)
        tasks = [
            alice.task(offer, TASK, f"t{i}").model_copy(
                update={"executor": executor, "command": None}
            )
            for i in range(2)
        ]
        await alice.accept(offer, tasks)
        runs = [await c.slave.run_task() for _ in range(2)]
        await c.restart_master()
        await c.reregister()
        assert c.held("sa") == TASK.scaled(2) + EXEC
        await c.reregister(runs=runs[1:])
        await eventually(lambda: c.held("sa") == TASK + EXEC)
        await c.reregister(runs=[])
        await eventually(lambda: c.held("sa") == Resources())
        assert not c.master.books.orphans


async def test_a_framework_back_after_a_restart_without_books_is_its_principals_again(
    tmp_path: Path,
) -> None:
    """alice, back with her id after a restart without books (and before any slave), is
    answered as re-subscribed, and the new master records the framework as hers."""
    async with cluster(tmp_path) as c:
        alice = await c.framework("alice")
        fid = (await alice.subscribe("a", role="alice", failover_timeout=60)).framework_id
        await c.restart_master()
        alice.inbox.messages.clear()
        again = await alice.subscribe("a", role="alice", framework_id=fid)
        assert again.resubscribed
        assert c.master.books.frameworks[fid].principal == "alice"
        assert c.master.registry.frameworks[fid].principal == "alice"
        assert not alice.inbox.of(Error)


# -- on real processes --------------------------------------------------------------------


async def test_after_a_real_masters_restart_without_its_books_alice_keeps_her_tasks(
    tmp_path: Path,
) -> None:
    """The issue's attack end to end: mosquitto with TLS, a master without --work-dir and a
    slave as processes, the real SDK drivers. alice runs two tasks; the master is
    restarted (no books at all); mallory, subscribing with alice's framework id before
    the slave is back and after it, is refused; alice's driver comes back to her id and
    her tasks, which ran on."""
    need_mosquitto()
    cluster_name, slave = "ids-live", ("slave-0", "--resources", "cpus:2;mem:512")
    principals = [*PRINCIPALS, ("slave-0", "slave")]
    async with secure_cluster(tmp_path, cluster_name, principals, [slave]) as c:
        ops = as_principal(c.url, c.store, "ops")
        recorder = Recorder()
        alice = SchedulerDriver(
            recorder,
            name="alice",
            broker=as_principal(c.url, c.store, "alice"),
            cluster=cluster_name,
            failover_timeout=120,
        )
        await alice.start(timeout=20)
        try:
            offer = await recorder.offer_on(alice)
            tasks = [build_task(offer, f"a{i}", TASK, command="sleep 300") for i in range(2)]
            await alice.launch_tasks([offer.offer_id], tasks)
            for task in tasks:
                await recorder.update(task.task_id, TaskState.RUNNING)
            fid = alice.framework_id or ""

            async def mallory_claims() -> str:
                mallory = SchedulerDriver(
                    Recorder(),
                    name="mallory",
                    broker=as_principal(c.url, c.store, "mallory"),
                    cluster=cluster_name,
                    framework_id=fid,
                )
                with pytest.raises(SubscribeRefused) as refused:
                    await mallory.start(timeout=20)
                return str(refused.value)

            [master] = [p for p in c.launcher.parties if p.kind == "master"]
            args = ("--principals", str(c.store.principals_file), "--http", "127.0.0.1:0")
            await c.launcher.stop(master)
            await c.launcher.start("master", "master", *args, "--allocation-interval", "0.1")
            assert f"unknown framework {fid}" in await mallory_claims()  # (before or after
            # the slave: the id's proof refuses it either way)
            state = await wait_state(ops, cluster_name, lambda s: len(s.slaves) == 1)
            assert f"unknown framework {fid}" in await mallory_claims()  # the slave is back

            def alices(s: State) -> bool:
                return any(f.framework_id == fid and f.running_tasks == 2 for f in s.frameworks)

            state = await wait_state(ops, cluster_name, alices, timeout=60)
            assert {f.principal for f in state.frameworks} == {"alice"}
            assert not any(s.state.terminal for s in recorder.statuses)  # they ran on
        finally:
            alice.stop()
            await alice.join()


async def classic_state(master: Master) -> dict[str, Any]:
    """`GET /master/state` as an operator's tool reads it (the answer is streamed as it is
    built, so it is read through a server)."""
    app = web.Application()
    app.add_routes(ClassicEndpoints(master_side(master), 0.0).routes())
    async with TestClient(TestServer(app)) as client:
        answer = await client.get("/master/state")
        assert answer.status == 200
        state: dict[str, Any] = json.loads(await answer.text())
    return state
