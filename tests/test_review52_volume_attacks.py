"""Review 52: a hostile tenant with valid credentials against reservations and persistent
volumes (operation grants, GROW_VOLUME / SHRINK_VOLUME). Each test says what must hold,
and fails on main as of 94492b0."""

from __future__ import annotations

from protocol.wire.messages import Accept, Error, Filters, OfferOperation, Rescind
from protocol.wire.resources import Resources
from protocol.wire.values import FrameworkCapability

from harness.helpers import eventually
from harness.master import Cluster
from harness.master import cluster as cluster

R = Resources.parse
SHARED = [FrameworkCapability.SHARED_RESOURCES]
V = "disk(a)[v1:data]<SHARED>"


async def test_a_destroy_of_a_shared_volume_not_in_its_offers_rescinds_nothing(
    cluster: Cluster,
) -> None:
    # framework_calls.on_accept rescinds every outstanding offer holding a shared volume
    # a DESTROY names once `may_make` passes -- and may_make asks the grants and the
    # role (framework_problem) only, not whether the Accept's offers hold the volume (nor
    # whether the framework takes shared resources). A tenant of a sub-role (a/x), without
    # SHARED_RESOURCES, whose offer of the slave holds nothing of role a, names a's shared
    # volume in a DESTROY: role a's offer of it is rescinded, then the DESTROY is refused
    # ("not in the offer"). Every offer of the slave it gets, it can do it again.
    await cluster.slave("s1", R(f"cpus:2;mem:1024;disk(a):1024;{V}:64;cpus(a/x):1;mem(a/x):64"))
    victim = await cluster.framework("victim", role="a", capabilities=SHARED)
    mine = await victim.next_offer()
    assert mine.resources[V] == 64
    attacker = await cluster.framework("attacker", role="a/x")
    theirs = await attacker.next_offer()
    assert V not in theirs.resources
    destroy = OfferOperation(type="DESTROY", resources=R(f"{V}:64"))
    await attacker.bus.publish(
        attacker.to_master,
        Accept(
            framework_id=attacker.framework_id,
            offer_ids=[theirs.offer_id],
            operations=[destroy],
            filters=Filters(refuse_seconds=0),
        ),
    )
    await eventually(lambda: any(e.code == "invalid-operation" for e in attacker.inbox.of(Error)))
    await cluster.rounds_pass()
    assert not victim.inbox.of(Rescind), "a's offer rescinded by a DESTROY of nothing offered"
    assert mine.offer_id in cluster.master.books.offers
