"""Review 70: the slave's bound of 1,024 reservations and volumes per top-level role is
shared by every tenant under that role: one tenant's volumes on `eng/a` leave a tenant
of `eng/b` no room to make one on its own reserved disk.

cbbdaea made the bound (review 68) one per top-level role, "a tenant: its sub-roles' are
its own" (`resource_operations._tenant`: the first segment of the role). On a tree of
roles the tenants are commonly sub-roles of one parent (Mesos's own example: eng/frontend,
eng/backend; a principal's `roles` list names its role exactly, `may_use_role`): mallory,
of role `eng/a`, with disk reserved for `eng/a`, makes 1,023 volumes of 1 MB in one CREATE
(granted by default), and bob, of role `eng/b`, with 64 MB reserved for `eng/b` on the same
slave, can make none ("role eng would hold 1025 resources of its own"). Review 68's case
again, one level down.
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


async def test_one_sub_roles_volumes_leave_a_sibling_sub_role_room_for_its_own(
    cluster: Cluster,
) -> None:
    master = cluster.master
    await cluster.slave("s1", R("cpus:2;mem:1024;disk(eng/a):2048;disk(eng/b):64"))
    hog = await cluster.framework("hog", principal="mallory", role="eng/a")
    await hog.next_offer()
    many = ";".join(f"disk(eng/a)[v{i}:d{i}]:1" for i in range(1022))
    await create(hog, many)
    await eventually(lambda: "disk(eng/a)[v1021:d1021]" in master.books.slaves["s1"].total.millis)
    honest = await cluster.framework("honest", principal="bob", role="eng/b")
    await honest.next_offer()
    await create(honest, "disk(eng/b)[db:data]:64")
    await eventually(
        lambda: (
            "disk(eng/b)[db:data]" in master.books.slaves["s1"].total.millis
            or bool(honest.inbox.of(Error))
        )
    )
    made = "disk(eng/b)[db:data]" in master.books.slaves["s1"].total.millis
    assert made, [e.message for e in honest.inbox.of(Error)]
