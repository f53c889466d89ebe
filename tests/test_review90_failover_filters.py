"""Review 90: a framework's decline filters outlive its disconnection.

Mesos's allocator clears a framework's offer filters when the framework is deactivated
(`HierarchicalAllocatorProcess::deactivateFramework`: `framework.offerFilters.clear()`),
which the master does when the scheduler's connection is lost. A scheduler that declined
every slave for an hour (Marathon's and Spark's habit when idle: long refuse_seconds),
then crashed and was restarted with its framework id, is offered the cluster again as it
re-subscribes. drfmesos kept the filters across the disconnection: the new process,
which never declined anything, waited out its predecessor's hour.
"""

from __future__ import annotations

from protocol.wire.messages import Gone
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.master import GB, Cluster, T
from harness.master import cluster as cluster


async def test_a_framework_back_after_its_connection_was_lost_is_offered_what_it_declined(
    cluster: Cluster,
) -> None:
    a = await cluster.framework("A", failover_timeout=30)
    await cluster.slave("s1", Resources(cpus=2, mem=2 * GB))
    offer = await a.next_offer()
    await a.decline(offer, refuse=3600)  # idle: not this slave for an hour
    framework_id = a.framework_id
    await a.bus.publish(  # its connection drops: the broker publishes its Last Will
        T.gone("framework", "framework"),
        Gone(kind="framework", id="A", incarnation=a.bus.incarnation),
    )
    await eventually(lambda: not cluster.master.books.frameworks[framework_id].connected)
    a2 = await cluster.framework_new_process("A2", framework_id)
    again = await a2.next_offer(timeout=5)
    assert again.slave_id == "s1"
