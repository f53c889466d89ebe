"""Review 59: a tenant at the bottom of the DRF order declines every offer with
`refuse_seconds` 0 and keeps another tenant from the room it declines, for as long as it
likes, using nothing. A filter of 0 is none (`OfferCycle._refusal`): the declined cpu is
back in the pool, the round that follows at once (a decline is worth one) offers it to
the one lowest in the order again -- the decliner -- and the tenant that wants it is
never offered it. The loop's promise (docs/explanation/allocation.md, the blog): what a
framework declines goes to the next framework in order. (Mesos keeps a filter at least
until its next allocation, MESOS-4302; here a filter of 0 is not kept at all.)

In process, on the memory transport."""

from __future__ import annotations

import pytest

from protocol.wire.messages import Offer

from harness.fakes import FakeFramework
from harness.master import Cluster
from harness.master import cluster as cluster
from harness.order_hog import answer_repeatedly

pytestmark = pytest.mark.timeout(60)
DECLINES = 20


async def test_what_a_framework_declines_with_no_filter_goes_to_the_next_in_order(
    cluster: Cluster,
) -> None:
    async def answer(m: FakeFramework, offer: Offer) -> None:
        await m.decline(offer, refuse=0)

    b, m = await answer_repeatedly(cluster, answer, DECLINES)
    assert b.offer_count() > 1, (
        f"M declined the free cpu {DECLINES} times with refuse_seconds 0 and was offered it "
        f"again each time; B, which wants it, was offered nothing after its first offer "
        f"(M {m.offer_count()} offers, B {b.offer_count()})"
    )
