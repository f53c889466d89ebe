"""A task group's executor across a master failover: the new leader learns it from the
slave, and neither offers its resources while the group runs nor holds them after.

The slave plays a group's executor (Mesos's default executor): its own resources are
booked by the master with the group that starts it, nothing runs in them, and the slave
ends it with its last task (ExecutorExited). None of its tasks names it, so a new leader
learns it only from the slave's Reregister (`group_executors`, as Mesos's agent names
every executor in `executor_infos`); before, it took the group's tasks back and offered
the executor's resources again, which the slave did not have.

In process: two masters on one registry in turn, a real slave (simulated tasks) that
re-registers with the new leader as it does with any, and a bare framework.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from master.ha.registry import MemoryStore, Registry
from master.master import Master, MasterConfig
from protocol.transport.base import Connector
from protocol.transport.memory import MemoryBroker
from protocol.wire.messages import (
    Accept,
    CommandInfo,
    Decline,
    ExecutorInfo,
    Failure,
    Filters,
    Kill,
    Offer,
    Offers,
    Reason,
    Reregister,
    RunningGroupExecutor,
    RunningTask,
    TaskGroup,
    TaskInfo,
    TaskState,
    Update,
)
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics
from slave.slave import Slave

from harness.fakes import FakeFramework
from harness.helpers import eventually, open_transport, start_master, start_simulated_slave

T = Topics("groupfailover")
SLAVE = Resources(cpus=2, mem=512)
EXECUTOR = Resources(cpus=0.5, mem=128)  # the group's executor's own
TASK = Resources(cpus=0.25, mem=32)
pytestmark = pytest.mark.timeout(60)


@dataclass
class Failover:
    stack: contextlib.AsyncExitStack
    connect: Connector
    store: MemoryStore
    master: Master
    slave: Slave
    fw: FakeFramework

    async def new_leader(self, *, registry: bool = True) -> Master:
        """The leader dies; a new one reads the registry and leads (without it: a master
        restarted without its registry); the slave hears it and re-registers, and the
        framework subscribes again."""
        await self.master.stop()
        await self.master.bus.close()
        store = self.store if registry else MemoryStore()
        self.master = master = await leader(self.stack, self.connect, store, "master-2")
        await eventually(lambda: "s1" in master.books.slaves, 20)  # (the framework after)
        fid = self.fw.framework_id
        await self.fw.subscribe("fw", framework_id=fid, failover_timeout=60)
        return master

    def offers(self) -> list[Offer]:
        return [o for batch in self.fw.inbox.of(Offers) for o in batch.offers]

    async def offer(self, where: Callable[[Offer], bool] = lambda o: True) -> Offer:
        """An offer of s1 this leader made and still holds out (the first to match
        `where`), waiting for one."""
        await self.fw.inbox.wait_until(lambda: self.outstanding(where) is not None, 20)
        offer = self.outstanding(where)
        assert offer is not None
        return offer

    async def whole(self) -> Offer:
        """An offer of all of s1: what the framework holds out declined (once more as
        more comes, an offer of a freed part, say) until one is of all of it."""
        fid = self.fw.framework_id
        while (offer := self.outstanding(lambda o: o.resources == SLAVE)) is None:
            held = [i for i, r in self.master.books.offers.items() if r.framework_id == fid]
            count = len(self.offers())
            if held:
                decline = Decline(
                    framework_id=fid, offer_ids=held, filters=Filters(refuse_seconds=0)
                )
                await self.fw.bus.publish(self.fw.to_master, decline)
            await self.more_offers(count)
        return offer

    async def more_offers(self, count: int) -> None:
        """Wait for an offer past the first `count` received."""
        await self.fw.inbox.wait_until(lambda: len(self.offers()) > count, 20)

    def outstanding(self, where: Callable[[Offer], bool]) -> Offer | None:
        """The first offer received that this leader still holds out and `where` takes."""
        held = self.master.books.offers
        return next((o for o in self.offers() if o.offer_id in held and where(o)), None)

    async def decline_all(self) -> None:
        """Every offer outstanding back to the pool (refused for no time)."""
        fid = self.fw.framework_id
        ids = [i for i, r in self.master.books.offers.items() if r.framework_id == fid]
        if ids:
            decline = Decline(framework_id=fid, offer_ids=ids, filters=Filters(refuse_seconds=0))
            await self.fw.bus.publish(self.fw.to_master, decline)
            await eventually(lambda: not any(i in self.master.books.offers for i in ids))


async def leader(
    stack: contextlib.AsyncExitStack, connect: Connector, store: MemoryStore, name: str
) -> Master:
    kept = Registry(store)
    await kept.load()
    config = MasterConfig(allocation_interval=0.05, heartbeat_interval=0.5)
    return await start_master(stack, connect, T, config, name, registry=kept)


@contextlib.asynccontextmanager
async def group_running(tmp_path: Path) -> AsyncIterator[Failover]:
    """A group of two tasks (`web`, `db`) under executor `pod` running on slave s1."""
    broker = MemoryBroker()
    connect = broker.connector(None)
    store = MemoryStore()
    async with contextlib.AsyncExitStack() as stack:
        master = await leader(stack, connect, store, "master-1")
        slave = await start_simulated_slave(stack, connect, T, tmp_path / "s1", SLAVE)
        fw_bus = await open_transport(stack, connect, "fw", inbox=T.framework("framework", "fw"))
        fw = FakeFramework(fw_bus, T, "fw", acknowledging=True)
        await fw_bus.subscribe(T.framework("framework", "fw"), fw.receive)
        await fw.subscribe("fw", failover_timeout=60)
        offer = (await fw.inbox.wait_for(Offers, lambda o: bool(o.offers), 20)).offers[0]
        assert offer.resources == SLAVE

        def task(task_id: str) -> TaskInfo:
            command = CommandInfo(value="sleep 300")
            return TaskInfo(task_id=task_id, slave_id="s1", resources=TASK, command=command)

        group = TaskGroup(
            executor_id="pod", executor_resources=EXECUTOR, tasks=[task("web"), task("db")]
        )
        await fw.bus.publish(
            fw.to_master,
            Accept(
                framework_id=fw.framework_id,
                offer_ids=[offer.offer_id],
                groups=[group],
                filters=Filters(refuse_seconds=0),
            ),
        )
        await fw.inbox.wait_until(lambda: fw.heard("web", TaskState.RUNNING), 20)
        await fw.inbox.wait_until(lambda: fw.heard("db", TaskState.RUNNING), 20)
        yield Failover(stack, connect, store, master, slave, fw)


def held(master: Master, framework_id: str) -> Resources:
    """What the allocator holds for the framework on s1, its offers left out."""
    offered = sum(
        (r.resources for r in master.books.offers.values() if r.framework_id == framework_id),
        Resources(),
    )
    return master.allocator.held(framework_id, "s1") - offered


async def back(f: Failover) -> None:
    """The new leader has the slave and the group's tasks back, booked to the framework."""
    master, fid = f.master, f.fw.framework_id

    def booked() -> bool:
        fw = master.books.frameworks.get(fid)
        return fw is not None and {"web", "db"} <= set(fw.tasks)

    await eventually(booked, 20)


async def test_a_new_leader_offers_nothing_a_running_groups_executor_holds_until_it_ends(
    tmp_path: Path,
) -> None:
    async with group_running(tmp_path) as f:
        master = await f.new_leader()
        await back(f)
        fid = f.fw.framework_id
        # what it offers of s1: the slave less the group's two tasks and its executor,
        # the executor counted once (the slave named the tasks and the executor both)
        await f.decline_all()
        offer = await f.offer()
        assert offer.resources == SLAVE - TASK - TASK - EXECUTOR, (
            f"the new leader offers {offer.resources} of s1, where the group's tasks and "
            f"its executor hold {TASK + TASK + EXECUTOR} of {SLAVE}"
        )
        books = master.books.frameworks[fid]
        assert books.executors == {("s1", "pod"): EXECUTOR}
        assert ("s1", "pod") in books.group_executors

        # the group's last task ends: its executor with it, its resources back in offers
        await f.fw.bus.publish(f.fw.to_master, Kill(framework_id=fid, task_id="web"))
        failure = await f.fw.inbox.wait_for(Failure, lambda m: m.executor_id == "pod", 20)
        assert failure.slave_id == "s1"
        await f.fw.inbox.wait_until(lambda: f.fw.heard("db", TaskState.KILLED), 20)  # (sibling)
        await eventually(lambda: not books.executors and not books.group_executors)
        assert (await f.whole()).resources == SLAVE


async def test_a_master_restarted_without_its_registry_holds_the_executor_for_its_framework(
    tmp_path: Path,
) -> None:
    """The slave is back before its framework: the group's tasks and executor are held
    by nobody, then the framework's once it subscribes (a group's executor still)."""
    async with group_running(tmp_path) as f:
        master = await f.new_leader(registry=False)
        await back(f)
        fid = f.fw.framework_id
        books = master.books.frameworks[fid]
        assert books.executors == {("s1", "pod"): EXECUTOR}
        assert ("s1", "pod") in books.group_executors
        assert not master.books.orphans
        await f.decline_all()
        offer = await f.offer()
        assert offer.resources == SLAVE - TASK - TASK - EXECUTOR
        assert held(master, fid) == TASK + TASK + EXECUTOR


async def test_a_slave_reregistering_again_with_its_groups_tasks_and_executor_books_it_once(
    tmp_path: Path,
) -> None:
    """Named twice (its Reregister again, on a new connection, after the new leader
    took it back: the tasks and the executor are known), the executor is not charged
    twice: the framework holds its tasks' and its executor's resources once."""
    async with group_running(tmp_path) as f:
        master = await f.new_leader()
        await back(f)
        fid = f.fw.framework_id
        once = TASK + TASK + EXECUTOR
        await eventually(lambda: held(master, fid) == once)
        tasks = [
            RunningTask(framework_id=fid, task=r.info, state=r.state)
            for r in f.slave.tasks.values()
        ]
        again = Reregister(
            slave_id="s1",
            hostname="s1.local",
            resources=SLAVE,
            incarnation="a-new-connection",
            tasks=tasks,
            group_executors=[
                RunningGroupExecutor(framework_id=fid, executor_id="pod", resources=EXECUTOR)
            ],
        )
        await f.slave.bus.publish(f.slave.to_master, again)
        await eventually(lambda: master.books.slaves["s1"].incarnation == "a-new-connection")
        assert held(master, fid) == once
        assert master.books.frameworks[fid].executors == {("s1", "pod"): EXECUTOR}


async def test_after_a_failover_a_framework_naming_the_groups_executor_gains_nothing(
    tmp_path: Path,
) -> None:
    """The executor's resources, as the new leader learnt them from the slave, stand: a
    group naming it with less is refused, as is a task of its own naming it; nothing of
    the framework's books changes."""
    async with group_running(tmp_path) as f:
        master = await f.new_leader()
        await back(f)
        fid = f.fw.framework_id
        books = master.books.frameworks[fid]
        before = held(master, fid)
        await f.decline_all()
        offer = await f.offer()

        def task(task_id: str) -> TaskInfo:
            command = CommandInfo(value="sleep 300")
            return TaskInfo(task_id=task_id, slave_id="s1", resources=TASK, command=command)

        cheap = TaskGroup(
            executor_id="pod", executor_resources=Resources(cpus=0.01), tasks=[task("cheap")]
        )
        custom = task("mine").model_copy(
            update={
                "command": None,
                "executor": ExecutorInfo(
                    executor_id="pod", command=CommandInfo(value="x"), resources=Resources()
                ),
            }
        )
        await f.fw.bus.publish(
            f.fw.to_master,
            Accept(
                framework_id=fid,
                offer_ids=[offer.offer_id],
                tasks=[custom],
                groups=[cheap],
                filters=Filters(refuse_seconds=0),
            ),
        )
        await f.fw.inbox.wait_until(lambda: f.fw.heard("cheap", TaskState.ERROR), 20)
        await f.fw.inbox.wait_until(lambda: f.fw.heard("mine", TaskState.ERROR), 20)
        refused = {
            u.status.task_id: u.status
            for u in f.fw.inbox.of(Update)
            if u.status.task_id in ("cheap", "mine")
        }
        assert refused["cheap"].reason == Reason.TASK_GROUP_INVALID
        assert "executor pod runs with" in (refused["cheap"].message or "")
        assert "runs task groups" in (refused["mine"].message or "")
        assert books.executors == {("s1", "pod"): EXECUTOR}
        assert held(master, fid) == before
