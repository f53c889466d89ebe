"""Draining, deactivating and reactivating a slave (Mesos 1.9's DRAIN_AGENT,
DEACTIVATE_AGENT, REACTIVATE_AGENT), the master's side, in process over the in-memory
transport with fake slaves and frameworks: what is offered, what is killed and how, when a
slave is DRAINED, what survives a failover and a slave's return, and what a tenant that
tries the calls, or tries to keep its tasks on a draining slave, gains (nothing)."""

from __future__ import annotations

import contextlib

import pytest

from master.books import DRAINED, DRAINING
from master.ha.registry import MemoryStore, Registry
from master.master import Master
from protocol.wire.messages import (
    DeactivateSlave,
    DrainSlave,
    Error,
    FrameworkCapability,
    KillTask,
    ReactivateSlave,
    Reason,
    Registered,
    Reregister,
    Rescind,
    Revive,
    RunningTask,
    TaskState,
    Wire,
)
from protocol.wire.resources import Resources
from protocol.wire.why import AskWhy, Why

from harness.drain import ANY_OFFER, SMALL, operator
from harness.fakes import FakeFramework, FakeSlave
from harness.helpers import eventually
from harness.master import GB, Cluster, master_on
from harness.master import cluster as cluster


async def running_task(c: Cluster, fw: FakeFramework, slave: FakeSlave, task_id: str = "t1") -> int:
    """`fw` runs `task_id` on `slave` (reported RUNNING, acknowledged); the offers it had
    had then (the next is the rest of the slave)."""
    offer = await fw.next_offer(after=fw.offer_count() - 1 if fw.offer_count() else 0)
    assert offer.slave_id == slave.slave_id
    had = fw.offer_count()
    await fw.accept(offer, [fw.task(offer, SMALL, task_id)], refuse=0)
    await slave.run_task()
    status = await fw.update_for(task_id, TaskState.RUNNING)
    await fw.acknowledge(status)
    return had


def kills(slave: FakeSlave, task_id: str) -> list[KillTask]:
    return [k for k in slave.inbox.of(KillTask) if k.task_id == task_id]


def maintenance(master: Master, slave_id: str) -> str | None:
    out = master.books.maintenance.get(slave_id)
    return out.drain or "deactivated" if out is not None else None


async def test_a_drained_slave_is_offered_to_no_one_its_tasks_killed_then_drained(
    cluster: Cluster,
) -> None:
    master = cluster.master
    ops = await operator(cluster)
    fw = await cluster.framework("A")
    slave = await cluster.slave("s1", Resources(cpus=4, mem=4 * GB))
    await fw.next_offer(after=await running_task(cluster, fw, slave))  # the rest, outstanding
    await ops.call(DrainSlave(slave_id="s1", max_grace_period=2.5))
    # its outstanding offer is rescinded, and the task killed with the drain's cap
    await fw.inbox.wait_for(Rescind)
    kill = (await slave.inbox.wait_for(KillTask)).model_copy()
    assert (kill.task_id, kill.reason, kill.grace_cap, kill.gone) == (
        "t1",
        Reason.SLAVE_DRAINING,
        2.5,
        False,
    )
    assert maintenance(master, "s1") == DRAINING
    assert master.views.slave_view("s1").maintenance == "draining"
    # the task ends; until its framework acknowledges that, the slave is DRAINING still
    fw.acknowledging = False
    await slave.report(fw.framework_id, "t1", TaskState.KILLED)
    ended = await fw.update_for("t1", TaskState.KILLED)
    await eventually(lambda: not master.books.slaves["s1"].tasks)
    master.drains.check()
    assert maintenance(master, "s1") == DRAINING
    offers_before = fw.offer_count()
    await fw.acknowledge(ended)
    await eventually(lambda: maintenance(master, "s1") == DRAINED)
    await eventually(lambda: master.registry.maintenance["s1"].drain == DRAINED)  # (after)
    # and stays out of the offers until reactivated
    await fw.bus.publish(fw.to_master, Revive(framework_id=fw.framework_id))
    assert not master.allocator.slaves["s1"].active
    assert fw.offer_count() == offers_before
    await ops.call(ReactivateSlave(slave_id="s1"))
    await fw.next_offer(after=offers_before)
    assert "s1" not in master.books.maintenance
    assert "s1" not in master.registry.maintenance


async def test_a_drain_that_marks_gone_ends_partition_aware_tasks_gone(
    cluster: Cluster,
) -> None:
    master = cluster.master
    ops = await operator(cluster)
    aware = await cluster.framework("A", capabilities=[FrameworkCapability.PARTITION_AWARE])
    slave = await cluster.slave("s1", Resources(cpus=4, mem=4 * GB))
    await running_task(cluster, aware, slave)
    await ops.call(DrainSlave(slave_id="s1", mark_gone=True))
    kill = await slave.inbox.wait_for(KillTask)
    assert kill.gone
    assert kill.grace_cap is None
    await slave.report(aware.framework_id, "t1", TaskState.GONE_BY_OPERATOR)
    await aware.acknowledge(await aware.update_for("t1", TaskState.GONE_BY_OPERATOR))
    await eventually(lambda: "s1" in master.books.gone_slaves)
    assert "s1" not in master.books.slaves
    assert "s1" not in master.books.maintenance
    await eventually(lambda: "s1" not in master.registry.maintenance)  # (written after)


async def test_deactivate_keeps_tasks_running_and_reactivate_brings_offers_back(
    cluster: Cluster,
) -> None:
    master = cluster.master
    ops = await operator(cluster)
    fw = await cluster.framework("A")
    slave = await cluster.slave("s1", Resources(cpus=4, mem=4 * GB))
    await fw.next_offer(after=await running_task(cluster, fw, slave))
    await ops.call(DeactivateSlave(slave_id="s1"))
    await fw.inbox.wait_for(Rescind)
    assert maintenance(master, "s1") == "deactivated"
    assert not kills(slave, "t1")  # its task runs on
    assert master.books.task(fw.framework_id, "t1") is not None
    # reactivating a slave that is not deactivated is refused, saying so
    await ops.call(ReactivateSlave(slave_id="s2"))
    assert "not deactivated" in (await ops.refused("ReactivateSlave")).message
    offers = fw.offer_count()
    await ops.call(ReactivateSlave(slave_id="s1"))
    await fw.next_offer(after=offers)
    assert maintenance(master, "s1") is None


async def test_a_draining_slave_may_not_be_reactivated_and_an_unknown_one_not_drained(
    cluster: Cluster,
) -> None:
    ops = await operator(cluster)
    fw = await cluster.framework("A")
    slave = await cluster.slave("s1", Resources(cpus=4, mem=4 * GB))
    await running_task(cluster, fw, slave)
    await ops.call(DrainSlave(slave_id="s1"))
    await slave.inbox.wait_for(KillTask)
    await ops.call(ReactivateSlave(slave_id="s1"))
    error = await ops.refused("ReactivateSlave")
    assert "still DRAINING" in error.message
    await ops.call(DrainSlave(slave_id="nobody"))
    assert (await ops.refused("DrainSlave")).code == "unknown-slave"
    assert "nobody" not in cluster.master.books.maintenance


async def test_a_framework_principal_may_not_drain_deactivate_or_reactivate(
    cluster: Cluster,
) -> None:
    master = cluster.master
    fw = await cluster.framework("A")
    await cluster.slave("s1", Resources(cpus=4, mem=4 * GB))
    await fw.next_offer()
    calls: list[Wire] = [
        DrainSlave(slave_id="s1"),
        DeactivateSlave(slave_id="s1"),
        ReactivateSlave(slave_id="s1"),
    ]
    for call in calls:
        await fw.bus.publish(fw.to_master, call)
        about = call.TYPE
        error = await fw.inbox.wait_for(Error, lambda e: e.about == about)  # noqa: B023
        assert error.code == "forbidden"
    assert not master.books.maintenance
    assert master.allocator.slaves["s1"].active


async def test_a_tenant_gains_nothing_by_relaunching_on_a_draining_slave(
    cluster: Cluster,
) -> None:
    """Its offer of the slave is rescinded: accepting it afterwards launches nothing; a task
    it launched there just before (still staging) is killed as the others are."""
    master = cluster.master
    ops = await operator(cluster)
    fw = await cluster.framework("A")
    slave = await cluster.slave("s1", Resources(cpus=4, mem=4 * GB))
    offer = await fw.next_offer()
    await fw.accept(offer, [fw.task(offer, SMALL, "early")], refuse=0)
    await eventually(lambda: master.books.task(fw.framework_id, "early") is not None)
    later = await fw.next_offer(after=1)
    await ops.call(DrainSlave(slave_id="s1"))
    await fw.inbox.wait_for(Rescind)
    kill = await slave.inbox.wait_for(KillTask)
    assert (kill.task_id, kill.reason) == ("early", Reason.SLAVE_DRAINING)
    await fw.accept(later, [fw.task(later, SMALL, "sneaky")])
    lost = await fw.update_for("sneaky", TaskState.LOST)  # as Mesos: the offer is gone
    assert lost.reason == Reason.INVALID_OFFERS
    assert [run.task.task_id for run in slave.runs()] == ["early"]
    assert master.books.maintenance["s1"].drain == DRAINING


async def test_why_says_a_framework_is_not_offered_a_draining_slave(cluster: Cluster) -> None:
    ops = await operator(cluster)
    fw = await cluster.framework("A")
    await cluster.slave("s1", Resources(cpus=4, mem=4 * GB))
    await fw.next_offer()
    await ops.call(DrainSlave(slave_id="s1"))
    await fw.inbox.wait_for(Rescind)
    await fw.bus.publish(fw.to_master, AskWhy(framework=fw.framework_id))
    why = await fw.inbox.wait_for(Why)
    codes = [r.code for r in why.reasons]
    assert "maintenance" in codes, codes
    said = next(r for r in why.reasons if r.code == "maintenance")
    assert "s1" in said.message
    assert "drained: s1" in said.message  # (it ran nothing: drained at once)


async def test_a_drain_survives_a_failover_and_its_slave_coming_back() -> None:
    """The new leader reads the drain from the registry: the slave stays out of the offers
    as it re-registers, the task it brings back is killed again, and it drains."""
    store = MemoryStore()
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        registry = Registry(store)
        async with master_on(c, registry, "master-1") as first:
            c.master = first
            ops = await operator(c)
            fw = await c.framework("A", failover_timeout=60)
            slave = await c.slave("s1", Resources(cpus=4, mem=4 * GB))
            await running_task(c, fw, slave)
            await ops.call(DrainSlave(slave_id="s1", max_grace_period=7))
            await slave.inbox.wait_for(KillTask)
        # a new leader on the same registry; the slave re-registers with its task
        registry = Registry(store)
        await registry.load()
        async with master_on(c, registry, "master-2") as second:
            assert second.books.maintenance["s1"].drain == DRAINING
            kills_before = len(kills(slave, "t1"))
            await slave.bus.publish(
                slave.to_master,
                Reregister(
                    slave_id="s1",
                    hostname="s1.local",
                    resources=slave.resources,
                    incarnation=slave.bus.incarnation,
                    tasks=[
                        RunningTask(
                            framework_id=fw.framework_id,
                            task=fw.task(ANY_OFFER, SMALL, "t1"),
                            state=TaskState.RUNNING,
                        )
                    ],
                ),
            )
            await slave.inbox.wait_until(lambda: len(kills(slave, "t1")) > kills_before)
            assert kills(slave, "t1")[-1].grace_cap == 7
            assert not second.allocator.slaves["s1"].active
            await fw.subscribe("A", framework_id=fw.framework_id, failover_timeout=60)
            await slave.report(fw.framework_id, "t1", TaskState.KILLED)
            await fw.acknowledge(await fw.update_for("t1", TaskState.KILLED))
            await eventually(lambda: second.books.maintenance["s1"].drain == DRAINED)


@pytest.mark.parametrize("call", ["drain", "deactivate"])
async def test_a_deactivated_slave_stays_out_when_it_reconnects(
    cluster: Cluster, call: str
) -> None:
    master = cluster.master
    ops = await operator(cluster)
    first = await cluster.slave("s1", Resources(cpus=4, mem=4 * GB))
    await first.inbox.wait_for(Registered)
    message = DrainSlave(slave_id="s1") if call == "drain" else DeactivateSlave(slave_id="s1")
    await ops.call(message)
    await eventually(lambda: "s1" in master.books.maintenance)
    slave = master.books.slaves["s1"]
    master.removals.disconnect_slave(slave, "test")
    again = await cluster.slave("s1", Resources(cpus=4, mem=4 * GB))  # registers again
    await again.inbox.wait_for(Registered)
    assert master.books.slaves["s1"].connected
    assert not master.allocator.slaves["s1"].active
