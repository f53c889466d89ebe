"""An operator's operation takes back only the offers it needs (review 78): the slave's
offers that hold what it needs are rescinded, the others stay; and an operation tasks
stand in the way of is refused with no offer taken back for nothing."""

from __future__ import annotations

from protocol.wire.framework import OfferOperation
from protocol.wire.messages import Error, Rescind
from protocol.wire.operator import OperateResources
from protocol.wire.resources import Resources

from harness.fakes import FakeFramework
from harness.helpers import eventually
from harness.master import Cluster, T
from harness.master import cluster as cluster

R = Resources.parse
RESERVE = OfferOperation(type="RESERVE", resources=R("cpus(team-a,ops):2;mem(team-a,ops):256"))


async def reserve_on(cluster: Cluster, slave_id: str) -> FakeFramework:
    """RESERVE on the slave, by operator `ops`; its inbox (a FakeFramework's)."""
    bus = await cluster.stack.enter_async_context(
        cluster.connect(name="ops", inbox=T.outbox("operator", "ops"), will=None)
    )
    ops = FakeFramework(bus, T, "ops")
    await bus.subscribe(T.outbox("operator", "ops"), ops.inbox)
    await bus.publish(
        T.inbound("operator", "ops"), OperateResources(slave_id=slave_id, operation=RESERVE)
    )
    return ops


async def test_the_offers_of_other_slaves_stay(cluster: Cluster) -> None:
    await cluster.slave("s1", R("cpus:4;mem:1024"))
    await cluster.slave("s2", R("cpus:4;mem:1024"))
    hog = await cluster.framework("hog")
    await hog.next_offer(after=1)  # both slaves, held
    held = {o.slave_id: o.offer_id for o in cluster.master.books.offers.values()}

    await reserve_on(cluster, "s1")

    master = cluster.master
    await eventually(lambda: master.books.slaves["s1"].total.contains(R("cpus(team-a,ops):2")))
    assert held["s2"] in master.books.offers
    assert [r.offer_id for r in hog.inbox.of(Rescind)] == [held["s1"]]


async def test_what_tasks_use_is_refused_and_no_offer_is_rescinded(cluster: Cluster) -> None:
    await cluster.slave("s1", R("cpus:4;mem:1024"))
    hog = await cluster.framework("hog")
    offer = await hog.next_offer()
    await hog.accept(offer, [hog.task(offer, R("cpus:3;mem:512"))], refuse=0)
    await hog.next_offer(after=1)  # the rest (cpus:1;mem:512), held
    held = set(cluster.master.books.offers)

    ops = await reserve_on(cluster, "s1")

    refused = await ops.inbox.wait_for(Error)
    assert "has not cpus:2;mem:256 free" in refused.message
    assert set(cluster.master.books.offers) == held
    assert not hog.inbox.of(Rescind)
