"""Review 62 (on 2cba8a0): review 59's decline-zero attack again, through an Accept of
no task and one operation it cannot make.

2cba8a0 filters an Accept "that launches and makes nothing" for one allocation interval,
as a Decline -- but it asks whether the Accept *carries* operations
(`whole = not launched and not msg.operations`), not whether any was made. An operation
refused (`OperationError`: here an UNRESERVE of a reservation the offer does not hold)
is dropped, and the whole offer goes back with the Accept's refuse_seconds 0: unfiltered.
The framework first in the DRF order, holding nothing, answers each offer so: the round
that follows at once offers the free cpu straight back to it, and the tenant that wants
it is never offered it.

In process, on the memory transport."""

from __future__ import annotations

import pytest

from protocol.wire.framework import OfferOperation
from protocol.wire.messages import Accept, Filters, Offer
from protocol.wire.resources import Resources

from harness.fakes import FakeFramework
from harness.master import Cluster
from harness.master import cluster as cluster
from harness.order_hog import answer_repeatedly

pytestmark = pytest.mark.timeout(60)
ANSWERS = 20


async def test_an_accept_of_a_refused_operation_does_not_keep_the_room_from_the_next_in_order(
    cluster: Cluster,
) -> None:
    bogus = OfferOperation(type="UNRESERVE", resources=Resources.parse("cpus(m,):1"))

    async def answer(m: FakeFramework, offer: Offer) -> None:
        await m.bus.publish(
            m.to_master,
            Accept(
                framework_id=m.framework_id,
                offer_ids=[offer.offer_id],
                tasks=[],
                operations=[bogus],
                filters=Filters(refuse_seconds=0),
            ),
        )

    b, m = await answer_repeatedly(cluster, answer, ANSWERS)
    assert b.offer_count() > 1, (
        f"M answered the free cpu {ANSWERS} times with an Accept of no task and one "
        f"operation refused, and was offered it again each time; B, which wants it, "
        f"was offered nothing after its first offer (M {m.offer_count()} offers, "
        f"B {b.offer_count()})"
    )
