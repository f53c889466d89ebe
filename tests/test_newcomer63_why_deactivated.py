"""A newcomer following the maintenance how-to deactivates every slave of a small cluster
(`drfmesos slaves deactivate` each) and asks `drfmesos why` of a framework waiting for an
offer. The first reason, "the one that explains", read `no-slave: no slave is connected
(3 registered, none connected)`, though all three were connected and only taken out by
the operator; `maintenance` came second. The allocator counts a deactivated slave as not
active, and `no-slave` took that for not connected."""

from __future__ import annotations

from protocol.wire.messages import DeactivateSlave, Rescind
from protocol.wire.resources import Resources
from protocol.wire.why import AskWhy, Why

from harness.helpers import open_transport
from harness.master import GB, Cluster, T
from harness.master import cluster as cluster


async def test_why_of_a_cluster_whose_slaves_are_all_deactivated_says_maintenance_first(
    cluster: Cluster,
) -> None:
    ops = await open_transport(cluster.stack, cluster.connect, "ops", inbox=T.operator("ops"))
    fw = await cluster.framework("A")
    await cluster.slave("s1", Resources(cpus=4, mem=4 * GB))
    await fw.next_offer()
    await ops.publish(T.inbound("operator", "ops"), DeactivateSlave(slave_id="s1"))
    await fw.inbox.wait_for(Rescind)
    await fw.bus.publish(fw.to_master, AskWhy(framework=fw.framework_id))
    why = await fw.inbox.wait_for(Why)
    codes = [r.code for r in why.reasons]
    assert codes[0] == "maintenance", [(r.code, r.message) for r in why.reasons]
    assert not any("none connected" in r.message for r in why.reasons), why.reasons
