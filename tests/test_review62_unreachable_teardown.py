"""Review 62 (on 16e6522): review 59's dying-share attack, when the tenant's slave was out
of touch as it tore its framework down.

A slave past its timeout is removed (its tasks UNREACHABLE: they may still run) and its
holds go with it. The tenant tears its framework down meanwhile, and subscribes another
in the same role. When the slave comes back it names the torn-down framework's tasks,
still running; the master tells it to shut them down and holds what they use while they
die (`Removals.hold_dying_again`) -- but for nobody's role ("whose role it was is
forgotten with the framework"), where the master has it: the role is in each task's
TaskInfo the slave sends back, and the removed framework's principal is remembered. So
those tasks, trapping SIGTERM through their 60 s grace, count 0 in role m's share: the
tenant's new framework is first in the DRF order for the cpu the honest tenant frees,
while its old tasks still hold half the slave.

In process, on the memory transport; the slave's removal as its timeout would have it
(`Removals.remove_slave`); the slave's tasks in their grace (not ended)."""

from __future__ import annotations

import functools

import pytest

from protocol.wire.framework import FrameworkCapability
from protocol.wire.messages import Offer, TaskInfo, TaskState, Teardown
from protocol.wire.resources import Resources
from protocol.wire.slave import Reregister, RunningTask

from harness.fakes import FakeFramework, graceful_tasks, offered
from harness.helpers import eventually
from harness.master import Cluster
from harness.master import cluster as cluster

pytestmark = pytest.mark.timeout(60)
PARTITION_AWARE = FrameworkCapability.PARTITION_AWARE
SLAVE = Resources(cpus=4, mem=4096)
TASK = Resources(cpus=1, mem=1024)


def tasks(fw: FakeFramework, offer: Offer, prefix: str, n: int) -> list[TaskInfo]:
    return graceful_tasks(fw, offer, TASK, prefix, n)


async def test_a_tenants_tasks_back_from_a_partition_count_in_its_share_while_they_die(
    cluster: Cluster,
) -> None:
    master = cluster.master
    m1 = await cluster.framework("M1", role="m")
    s1 = await cluster.slave("s1", SLAVE)
    s1.ends_shut_down_frameworks = False  # (its tasks in their grace: not ended)
    offer = await m1.next_offer()
    await m1.accept(offer, tasks(m1, offer, "m", 2), refuse=60)  # M: 2 of 4 cpus
    runs = [await s1.run_task() for _ in range(2)]
    b = await cluster.framework("B", role="b", capabilities=[PARTITION_AWARE])
    offer = await b.next_offer()
    await b.accept(offer, tasks(b, offer, "b", 2), refuse=0.01)  # B: the other 2
    runs += [await s1.run_task() for _ in range(2)]

    books = master.books
    await eventually(
        lambda: all(
            books.task(r.framework_id, r.task.task_id).state == TaskState.RUNNING for r in runs
        )  # type: ignore[union-attr]
    )
    # s1 is out of touch past its timeout: removed, its tasks unreachable
    master.removals.remove_slave(master.books.slaves["s1"], "test: out of touch")
    # M tears its framework down meanwhile and subscribes another in its role
    await m1.bus.publish(m1.to_master, Teardown(framework_id=m1.framework_id))
    await eventually(lambda: m1.framework_id not in master.books.frameworks)
    m2 = await cluster.framework("M2", role="m")

    # s1 comes back with all four tasks still running (M's two trap SIGTERM, 60 s)
    running = [
        RunningTask(framework_id=r.framework_id, task=r.task, state=TaskState.RUNNING) for r in runs
    ]
    back = Reregister(
        slave_id="s1",
        hostname="s1.local",
        resources=SLAVE,
        incarnation=s1.bus.incarnation,
        tasks=running,
    )
    await s1.bus.publish(s1.to_master, back)
    await eventually(
        lambda: "s1" in master.books.slaves and len(master.books.slaves["s1"].tasks) == 2
    )
    await eventually(lambda: master.allocator.free("s1").quantities().get("cpus", 0) == 0)

    assert len(master.books.dying) == 1  # (M's two tasks held while they die: by nobody)
    charged = dict(master.allocator._charged.get("s1", {}))
    # one of B's tasks finishes: the cpu it frees goes to whoever DRF says
    seen = (m2.offer_count(), b.offer_count())
    await s1.report(runs[2].framework_id, runs[2].task.task_id, TaskState.FINISHED)
    await eventually(functools.partial(offered, m2, b, seen))
    given = "M" if m2.offer_count() > seen[0] else "B"
    assert given == "B", (
        "the cpu B's finished task freed was offered to M's new framework: M's torn-down "
        "tasks, back from the partition and dying on 2 of the slave's 4 cpus, count 0 in "
        "role m's share (held for nobody's role), where B's 1 running cpu counts 0.25 "
        f"(charged to roles on s1: {charged})"
    )
