"""Review 61 (on f10e825): review 59's decline-zero attack, through an Accept of no task.

f10e825 filters a Decline of refuse_seconds 0 for one allocation interval, so that what a
framework first in the DRF order declines goes to the next in order. An Accept that
launches nothing is a decline too (Mesos: an Accept without operations declines its
offers), but its leftover -- here the whole offer -- goes back through
`OfferCycle.decline` without `whole`: with refuse_seconds 0 it is not filtered, the round
that follows at once offers it straight back to the one first in the order, and the
tenant that wants it is never offered it. (Accept of a tiny task with refuse 0 does the
same with the rest of the offer, at a cost of the tiny task.)

In process, on the memory transport."""

from __future__ import annotations

import pytest

from protocol.wire.messages import Offer

from harness.fakes import FakeFramework
from harness.master import Cluster
from harness.master import cluster as cluster
from harness.order_hog import answer_repeatedly

pytestmark = pytest.mark.timeout(60)
ANSWERS = 20


async def test_an_accept_of_nothing_with_no_filter_does_not_keep_the_room_from_the_next_in_order(
    cluster: Cluster,
) -> None:
    async def answer(m: FakeFramework, offer: Offer) -> None:
        await m.accept(offer, [], refuse=0)  # launches nothing: declines it whole

    b, m = await answer_repeatedly(cluster, answer, ANSWERS)
    assert b.offer_count() > 1, (
        f"M answered the free cpu {ANSWERS} times with an Accept of no task and "
        f"refuse_seconds 0 and was offered it again each time; B, which wants it, was "
        f"offered nothing after its first offer (M {m.offer_count()} offers, "
        f"B {b.offer_count()})"
    )
