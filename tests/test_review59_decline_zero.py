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

from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.master import Cluster
from harness.master import cluster as cluster

pytestmark = pytest.mark.timeout(60)
DECLINES = 20


async def test_what_a_framework_declines_with_no_filter_goes_to_the_next_in_order(
    cluster: Cluster,
) -> None:
    b = await cluster.framework("B", role="b")
    s1 = await cluster.slave("s1", Resources(cpus=4, mem=4096))
    offer = await b.next_offer()
    await b.accept(offer, [b.task(offer, Resources(cpus=3, mem=3072))], refuse=0.01)
    await s1.run_task()  # B runs 3 of 4 cpus and wants more: 1 cpu is free
    m = await cluster.framework("M", role="m")  # M holds nothing: first in order
    for n in range(DECLINES):
        declined = await m.next_offer(n)
        await m.decline(declined, refuse=0)
        # (what it declined goes to one of the two: B, or M again)
        await eventually(lambda n=n: b.offer_count() > 1 or m.offer_count() > n + 1)
        if b.offer_count() > 1:
            break
    assert b.offer_count() > 1, (
        f"M declined the free cpu {DECLINES} times with refuse_seconds 0 and was offered it "
        f"again each time; B, which wants it, was offered nothing after its first offer "
        f"(M {m.offer_count()} offers, B {b.offer_count()})"
    )
