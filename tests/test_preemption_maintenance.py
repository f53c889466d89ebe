"""Preemption beside an operator's maintenance, in process over the in-memory transport
with fake slaves and frameworks: a slave an operator took out of the offers
(DEACTIVATE_AGENT, a drain) is no room for a starving framework, so preemption neither
ends a task there (the room it frees is never offered) nor counts room there as free."""

from __future__ import annotations

import contextlib
import dataclasses

from protocol.transport.base import Transport
from protocol.wire.messages import (
    DeactivateSlave,
    KillTask,
    Reason,
    Request,
    Rescind,
    TaskRequest,
    TaskState,
)
from protocol.wire.resources import Resources

from harness.fakes import FakeFramework, FakeSlave
from harness.helpers import Inbox, eventually, open_transport
from harness.master import FAST, GB, Cluster, T

TASK = Resources(cpus=1, mem=GB)
NODE = Resources(cpus=2, mem=2 * GB)
PREEMPTING = dataclasses.replace(FAST, preemption_timeout=0.2, preemption_notice=0.2)


async def fill(c: Cluster, fw: FakeFramework, slave_id: str, prefix: str) -> FakeSlave:
    """A slave that registers now, and two tasks of `fw` that fill it."""
    after = fw.offer_count()
    slave = await c.slave(slave_id, NODE)
    offer = await fw.next_offer(after=after)
    assert offer.slave_id == slave_id
    tasks = [fw.task(offer, TASK, f"{prefix}-{i}") for i in range(2)]
    await fw.accept(offer, tasks, refuse=0)
    await slave.run_task()
    await slave.run_task()
    return slave


async def operator(stack: contextlib.AsyncExitStack, c: Cluster) -> Transport:
    """An operator's bus, its answers read (and left)."""
    ops = await open_transport(stack, c.connect, "ops", inbox=T.operator("ops"))
    await ops.subscribe(T.operator("ops"), Inbox())
    return ops


async def starving(c: Cluster) -> FakeFramework:
    """`late`, which declares two tasks and holds nothing."""
    late = await c.framework("late")
    wants = Request(framework_id=late.framework_id, requests=[TaskRequest(resources=TASK, count=2)])
    await late.bus.publish(late.to_master, wants)
    return late


def preempted(slave: FakeSlave) -> list[KillTask]:
    return [k for k in slave.inbox.of(KillTask) if k.reason == Reason.TASK_PREEMPTED]


async def test_preemption_ends_no_task_on_a_slave_taken_out_and_the_claimant_gets_room() -> None:
    """hog fills s1, then s2 (its younger tasks); an operator deactivates s2 for
    maintenance; late declares two tasks and starves. Its room must come from s1, the
    slave it can be offered: a task of hog's ended on s2 is work thrown away for room
    nobody is offered, and late starves on."""
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        master = await c.start_master(PREEMPTING)
        ops = await operator(stack, c)
        hog = await c.framework("hog")
        s1 = await fill(c, hog, "s1", "old")
        s2 = await fill(c, hog, "s2", "young")
        await ops.publish(T.inbound("operator", "ops"), DeactivateSlave(slave_id="s2"))
        await eventually(lambda: "s2" in master.books.maintenance)

        late = await starving(c)

        await eventually(lambda: bool(preempted(s1) or preempted(s2)), timeout=10)
        assert not preempted(s2), (
            f"hog's {[k.task_id for k in preempted(s2)]} preempted on s2, which no one is "
            "offered while it is deactivated"
        )
        for kill in preempted(s1):
            await s1.report(kill.framework_id, kill.task_id, TaskState.KILLED)
        offer = await late.next_offer(timeout=10)
        assert offer.slave_id == "s1"


async def test_room_on_a_slave_taken_out_does_not_keep_a_starving_framework_from_preemption() -> (
    None
):
    """hog fills s1 and s2; s3 is empty and deactivated by an operator. late starves
    (nothing it can be offered holds one of its tasks), so preemption takes one of hog's
    tasks for it: s3's idle room is no room to it."""
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        master = await c.start_master(PREEMPTING)
        ops = await operator(stack, c)
        hog = await c.framework("hog")
        s1 = await fill(c, hog, "s1", "a")
        s2 = await fill(c, hog, "s2", "b")
        after = hog.offer_count()
        s3 = await c.slave("s3", NODE)
        await hog.next_offer(after=after)  # (hog holds it, unanswered, until it is rescinded)
        await ops.publish(T.inbound("operator", "ops"), DeactivateSlave(slave_id="s3"))
        await hog.inbox.wait_for(Rescind)
        assert not master.allocator.slaves["s3"].active

        await starving(c)

        # hog holds 4 of 6 cpus (its fair share is half); late holds none and is offered
        # nothing it can use: a task of hog's on s1 or s2 is to go
        await eventually(lambda: bool(preempted(s1) or preempted(s2)), timeout=10)
        assert not preempted(s3)
