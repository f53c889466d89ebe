"""Review 68: one tenant spends a slave's whole budget of reservations and volumes, and
every other tenant's RESERVE and CREATE on that slave is refused.

The reservations reference: "A slave holds at most 1,024 resources of their own (each
reservation and each volume is one ...): a RESERVE or CREATE past that is refused". The
bound is the slave's, shared by every role and principal, and CREATE is granted to every
principal by default: a tenant with some disk reserved for its role makes 1,020 volumes
of 1 MB in one Accept (one CREATE), and another tenant, on its own role's reserved disk
of the same slave, can make no volume at all ("slave s1 would hold 1025 resources of
their own"). Mesos has no such bound; here it needs to be one a tenant cannot spend for
the others (per role or principal, say).
"""

from __future__ import annotations

from protocol.wire.messages import Accept, Error, Filters, OfferOperation
from protocol.wire.resources import Resources

from harness.fakes import FakeFramework
from harness.helpers import eventually
from harness.master import Cluster
from harness.master import cluster as cluster

R = Resources.parse


async def create(fw: FakeFramework, volumes: str) -> None:
    offer = await fw.next_offer(after=fw.offer_count() - 1)
    await fw.bus.publish(
        fw.to_master,
        Accept(
            framework_id=fw.framework_id,
            offer_ids=[offer.offer_id],
            operations=[OfferOperation(type="CREATE", resources=R(volumes))],
            filters=Filters(refuse_seconds=0),
        ),
    )


async def test_one_tenants_volumes_leave_another_tenant_room_for_its_own(
    cluster: Cluster,
) -> None:
    master = cluster.master
    await cluster.slave("s1", R("cpus:2;mem:1024;disk(a):2048;disk(b):64"))
    hog = await cluster.framework("hog", principal="mallory", role="a")
    await hog.next_offer()
    many = ";".join(f"disk(a)[v{i}:d{i}]:1" for i in range(1020))
    await create(hog, many)
    await eventually(lambda: "disk(a)[v1019:d1019]" in master.books.slaves["s1"].total.millis)
    honest = await cluster.framework("honest", principal="bob", role="b")
    await honest.next_offer()
    await create(honest, "disk(b)[db:data]:64")
    await eventually(
        lambda: (
            "disk(b)[db:data]" in master.books.slaves["s1"].total.millis
            or bool(honest.inbox.of(Error))
        )
    )
    made = "disk(b)[db:data]" in master.books.slaves["s1"].total.millis
    assert made, [e.message for e in honest.inbox.of(Error)]
