"""Review 62 (on 2cba8a0): review 59's decline-zero attack again, through an Accept that
names one offer it does not hold.

2cba8a0 filters an Accept that launches nothing for one allocation interval, as a
Decline. But an Accept whose offers have a problem (one offer id unknown, gone, or
another's; offers spanning two slaves) never gets there: its valid offers "go back to
the pool, unfiltered" (`Accepts.on_accept`: `cycle.decline(..., None, ...)`,
not `whole`). The framework first in the DRF order, holding nothing, answers each offer
with `Accept(offer_ids=[the offer, "no-such-offer"], tasks=[])`: the round that follows
at once offers the free cpu straight back to it, and the tenant that wants it is never
offered it (an answer that costs it nothing: no task, no Error).

In process, on the memory transport."""

from __future__ import annotations

import pytest

from protocol.wire.messages import Accept, Filters, Offer

from harness.fakes import FakeFramework
from harness.master import Cluster
from harness.master import cluster as cluster
from harness.order_hog import answer_repeatedly

pytestmark = pytest.mark.timeout(60)
ANSWERS = 20


async def test_an_accept_naming_a_bogus_offer_does_not_keep_the_room_from_the_next_in_order(
    cluster: Cluster,
) -> None:
    async def answer(m: FakeFramework, offer: Offer) -> None:
        await m.bus.publish(
            m.to_master,
            Accept(
                framework_id=m.framework_id,
                offer_ids=[offer.offer_id, "no-such-offer"],
                tasks=[],
                filters=Filters(refuse_seconds=0),
            ),
        )

    b, m = await answer_repeatedly(cluster, answer, ANSWERS)
    assert b.offer_count() > 1, (
        f"M answered the free cpu {ANSWERS} times with an Accept of no task naming one "
        f"offer it does not hold, and was offered it again each time; B, which wants it, "
        f"was offered nothing after its first offer (M {m.offer_count()} offers, "
        f"B {b.offer_count()})"
    )
