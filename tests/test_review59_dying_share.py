"""Review 59: a tenant tears its framework down and subscribes a new one at once: its
tasks, trapping SIGTERM, run on in their kill grace (up to the slave's 60 s
--max-kill-grace; a batch task finishes its work there), held "by nobody" (master.dying),
so its role's dominant share drops to 0 while it still uses the room. The new framework
is first in DRF order and is offered every cpu the honest tenant's tasks free: the
tenant uses the whole slave while the other, at its fair share before, is left with
nothing (M tearing down after each launch). Done every minute, a tenant's work always
runs as "dying", charged to nobody.

In process, on the memory transport; the slave's tasks in their grace (not ended)."""

from __future__ import annotations

import functools

import pytest

from protocol.wire.messages import Offer, ShutdownFramework, TaskInfo, TaskState, Teardown
from protocol.wire.resources import Resources

from harness.fakes import FakeFramework, graceful_tasks, offered
from harness.helpers import eventually
from harness.master import Cluster
from harness.master import cluster as cluster

pytestmark = pytest.mark.timeout(60)
SLAVE = Resources(cpus=4, mem=4096)
TASK = Resources(cpus=1, mem=1024)


def tasks(fw: FakeFramework, offer: Offer, prefix: str, n: int) -> list[TaskInfo]:
    return graceful_tasks(fw, offer, TASK, prefix, n)


async def test_a_torn_down_tenants_dying_tasks_count_in_its_share(cluster: Cluster) -> None:
    master = cluster.master
    m1 = await cluster.framework("M1", role="m")
    s1 = await cluster.slave("s1", SLAVE)
    s1.ends_shut_down_frameworks = False  # (its tasks in their grace: not ended)
    offer = await m1.next_offer()
    await m1.accept(offer, tasks(m1, offer, "m", 2), refuse=60)  # M: 2 of 4 cpus
    for _ in range(2):
        await s1.run_task()
    b = await cluster.framework("B", role="b")
    offer = await b.next_offer()
    await b.accept(offer, tasks(b, offer, "b", 2), refuse=0.01)  # B: the other 2
    runs = [await s1.run_task() for _ in range(2)]

    # M tears its framework down (its two tasks trap SIGTERM and run on) and comes back
    shutdowns = len(s1.inbox.of(ShutdownFramework))
    await m1.bus.publish(m1.to_master, Teardown(framework_id=m1.framework_id))
    await s1.inbox.wait_count(ShutdownFramework, shutdowns + 1)
    m2 = await cluster.framework("M2", role="m")

    # B's tasks finish one after another; each cpu freed goes to whoever DRF says, and M
    # tears down and comes back again after each of its launches
    given: list[str] = []
    for n, run in enumerate(runs):
        await s1.report(run.framework_id, run.task.task_id, TaskState.FINISHED)
        seen = (m2.offer_count(), b.offer_count())
        await eventually(functools.partial(offered, m2, b, seen))
        if m2.offer_count() > seen[0]:
            offer = await m2.next_offer(seen[0])
            given.append("M")
            await m2.accept(offer, tasks(m2, offer, f"n{len(given)}", 1), refuse=0.01)
            await s1.run_task()
            shutdowns = len(s1.inbox.of(ShutdownFramework))
            await m2.bus.publish(m2.to_master, Teardown(framework_id=m2.framework_id))
            await s1.inbox.wait_count(ShutdownFramework, shutdowns + 1)
            m2 = await cluster.framework(f"M{n + 3}", role="m")
        else:
            offer = await b.next_offer(seen[1])
            given.append("B")
            await b.accept(offer, tasks(b, offer, f"c{len(given)}", 1), refuse=0.01)
            await s1.run_task()
    assert master.allocator.free("s1").quantities().get("cpus", 0) == 0
    # M's role runs 2 dying tasks + what M2 took; B, at its fair share of 2 before, asks
    assert given == ["B", "B"], (
        f"the cpus B's tasks freed went to {given}: M, whose torn-down tasks run on in "
        f"their grace counted at share 0, now uses {2 + given.count('M')} of the slave's "
        f"4 cpus and B {given.count('B')}"
    )
