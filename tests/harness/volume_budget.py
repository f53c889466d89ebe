"""One role's volumes against a slave's bound of resources of their own (review68,
review70): a hog of one role makes volumes up to the bound in one CREATE, then a tenant of
another role makes one of its own on the same slave."""

from __future__ import annotations

from protocol.wire.messages import Error, OfferOperation
from protocol.wire.resources import Resources

from harness.fakes import FakeFramework, operate
from harness.helpers import eventually
from harness.master import Cluster

R = Resources.parse


async def create(fw: FakeFramework, volumes: str) -> None:
    """`volumes` created on the framework's latest offer, the rest refused for no time."""
    offer = await fw.next_offer(after=fw.offer_count() - 1)
    await operate(fw, offer, OfferOperation(type="CREATE", resources=R(volumes)))


async def after_a_hogs_volumes(
    cluster: Cluster, hogs: str, others: str, count: int
) -> tuple[bool, list[str]]:
    """Slave s1 with disk reserved for role `hogs` (2 GB) and for role `others` (64 MB);
    mallory's framework of `hogs` makes `count` volumes of 1 MB there, then bob's of
    `others` one of 64 MB: whether it was made, and the errors bob was sent."""
    master = cluster.master
    await cluster.slave("s1", R(f"cpus:2;mem:1024;disk({hogs}):2048;disk({others}):64"))
    hog = await cluster.framework("hog", principal="mallory", role=hogs)
    await hog.next_offer()
    many = ";".join(f"disk({hogs})[v{i}:d{i}]:1" for i in range(count))
    await create(hog, many)
    last = f"disk({hogs})[v{count - 1}:d{count - 1}]"
    await eventually(lambda: last in master.books.slaves["s1"].total.millis)
    honest = await cluster.framework("honest", principal="bob", role=others)
    await honest.next_offer()
    await create(honest, f"disk({others})[db:data]:64")
    volume = f"disk({others})[db:data]"
    await eventually(
        lambda: volume in master.books.slaves["s1"].total.millis or bool(honest.inbox.of(Error))
    )
    made = volume in master.books.slaves["s1"].total.millis
    return made, [e.message for e in honest.inbox.of(Error)]
