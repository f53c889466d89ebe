"""Review 62 (on f10e825): review 59's decline-zero attack again, through a Decline and
a Revive.

f10e825 keeps what a framework declines from it for one allocation interval, refuse 0
or not, so that it goes to the next in the DRF order. A Revive clears every filter of
the framework's (`OfferCycle.revive` -> `Allocator.revive`), that one-interval floor
too. The framework first in the order, holding nothing, answers each offer with
`Decline(refuse_seconds=0)` and at once a `Revive`: the round that follows offers the
free cpu straight back to it, and the tenant that wants it is never offered it (Mesos's
REVIVE clears filters too; but there a decline's filter is no promise of the order's,
here it is: the floor a Decline is kept by should outlast a Revive of the same
framework, or a Revive within the interval be taken as the decline's end, not its
undoing).

In process, on the memory transport."""

from __future__ import annotations

import pytest

from protocol.wire.framework import Revive
from protocol.wire.messages import Offer

from harness.fakes import FakeFramework
from harness.master import Cluster
from harness.master import cluster as cluster
from harness.order_hog import answer_repeatedly

pytestmark = pytest.mark.timeout(60)
ANSWERS = 20


async def test_a_decline_then_a_revive_does_not_keep_the_room_from_the_next_in_order(
    cluster: Cluster,
) -> None:
    async def answer(m: FakeFramework, offer: Offer) -> None:
        await m.decline(offer, refuse=0)
        await m.bus.publish(m.to_master, Revive(framework_id=m.framework_id))

    b, m = await answer_repeatedly(cluster, answer, ANSWERS)
    assert b.offer_count() > 1, (
        f"M answered the free cpu {ANSWERS} times with a Decline (refuse 0) and a "
        f"Revive, and was offered it again each time; B, which wants it, "
        f"was offered nothing after its first offer (M {m.offer_count()} offers, "
        f"B {b.offer_count()})"
    )
