"""An operator cannot reserve (or unreserve, or make or destroy a volume on) what a
framework holds in an offer it does not answer: a tenant that sits on its offers keeps
the operator out of the slave for as long as it likes.

Scenario: a slave's resources are all in an offer to a framework that does not answer
it (a hung scheduler, or a tenant that holds offers on purpose; the master has no offer
timeout unless its operator sets one, as in Mesos). The operator runs
`drfmesos reserve SLAVE 'cpus(team-a):2;mem(team-a):256'` to give team-a room there.

Mesos: an operator's RESERVE_RESOURCES (and UNRESERVE_RESOURCES, CREATE_VOLUMES,
DESTROY_VOLUMES) rescinds the agent's outstanding offers as it needs, then is applied
(`Master::Http::_operation`: "We greedily rescind one offer at time until we've
rescinded enough offers to cover for 'resources'"). Offers are not the
framework's to keep from the operator.

drfmesos: `ResourceOperations.by_operator` asks `Allocator.update_available`, which takes
only what is unallocated; offered resources are allocated, so the call is refused ("slave
s1 has not cpus:2;mem:256 free") and nothing is rescinded. The operator is told to
try again, and it stays refused while the tenant holds the offer
(`tests/test_operation_grants.py` waits for the resources to be free before calling).

Why a user relies on it: reservations and volumes are how an operator gives a team
guaranteed room on particular machines; on a busy cluster every free resource is in
somebody's offer most of the time, and a hostile tenant can hold them indefinitely.
"""

from __future__ import annotations

from protocol.wire.framework import OfferOperation
from protocol.wire.operator import OperateResources
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.master import Cluster, T
from harness.master import cluster as cluster

R = Resources.parse


async def test_an_operators_reserve_rescinds_the_offer_that_holds_the_resources(
    cluster: Cluster,
) -> None:
    await cluster.slave("s1", R("cpus:4;mem:1024"))
    hog = await cluster.framework("hog")
    await hog.next_offer()  # the whole slave, held: never answered

    ops = await cluster.stack.enter_async_context(
        cluster.connect(name="ops", inbox=T.outbox("operator", "ops"), will=None)
    )
    reserve = OfferOperation(type="RESERVE", resources=R("cpus(team-a,ops):2;mem(team-a,ops):256"))
    await ops.publish(
        T.inbound("operator", "ops"), OperateResources(slave_id="s1", operation=reserve)
    )

    master = cluster.master
    await eventually(
        lambda: master.books.slaves["s1"].total.contains(R("cpus(team-a,ops):2")), timeout=5
    )
