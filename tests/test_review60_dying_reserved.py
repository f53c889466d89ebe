"""Review 60: a torn-down tenant's dying tasks on its role's reserved resources count
nothing in the role's share, and its next framework is first again for the room the
honest tenant frees (review 59's attack, with the tasks on reserved resources).

`Allocator.hold_unowned(slave, resources, role)` charges the role's sorter with the
resources as they are (`cpus(m)`, `mem(m)`), where a framework's allocation is charged as
what it is (`_what`: `cpus`, `mem`, whoever's). The DRF share is over the cluster's
totals of `cpus` and `mem`: the reserved names count 0. M holds half the slave (its
reservation, 2 cpus and 2 GB, statically reserved to its role, as an operator grants a
team), tears down with its two tasks trapping SIGTERM through a 60 s grace, subscribes
again: its share is 0, B's (2 cpus of 4) 0.5, and the cpu B's task frees goes to M.

In process, on the memory transport; the slave's tasks in their grace (not ended)."""

from __future__ import annotations

import functools

import pytest

from protocol.wire.messages import ShutdownFramework, TaskState, Teardown
from protocol.wire.resources import Resources

from harness.fakes import graceful_tasks, offered
from harness.helpers import eventually
from harness.master import Cluster
from harness.master import cluster as cluster

pytestmark = pytest.mark.timeout(60)
SLAVE = Resources({"cpus(m)": 2, "mem(m)": 2048, "cpus": 2, "mem": 2048})
RESERVED = Resources({"cpus(m)": 1, "mem(m)": 1024})
TASK = Resources(cpus=1, mem=1024)


async def test_dying_tasks_on_reserved_resources_count_in_their_roles_share(
    cluster: Cluster,
) -> None:
    master = cluster.master
    m1 = await cluster.framework("M1", role="m")
    s1 = await cluster.slave("s1", SLAVE)
    s1.ends_shut_down_frameworks = False  # (its tasks in their grace: not ended)
    offer = await m1.next_offer()
    mine = graceful_tasks(m1, offer, RESERVED, "m", 2)
    await m1.accept(offer, mine, refuse=60)  # its reservation
    for _ in range(2):
        await s1.run_task()
    b = await cluster.framework("B", role="b")
    offer = await b.next_offer()
    await b.accept(offer, graceful_tasks(b, offer, TASK, "b", 2), refuse=0.01)  # B: the other 2
    runs = [await s1.run_task() for _ in range(2)]

    shutdowns = len(s1.inbox.of(ShutdownFramework))
    await m1.bus.publish(m1.to_master, Teardown(framework_id=m1.framework_id))
    await s1.inbox.wait_count(ShutdownFramework, shutdowns + 1)
    m2 = await cluster.framework("M2", role="m")
    share = master.allocator.roles.held("m")

    await s1.report(runs[0].framework_id, runs[0].task.task_id, TaskState.FINISHED)
    seen = (m2.offer_count(), b.offer_count())
    await eventually(functools.partial(offered, m2, b, seen))
    to = "M" if m2.offer_count() > seen[0] else "B"
    assert to == "B", (
        f"the cpu B's task freed was offered to M's next framework: M's two dying tasks "
        f"(2 of the slave's 4 cpus, 2 of its 4 GB, on M's reservation) are charged to its "
        f"role as {share}, which its DRF share counts as 0, B at 0.5"
    )
