"""The rig of the decline-zero attack (reviews 59, 61, 62): B runs 3 of a slave's 4 cpus
and wants more; M, holding nothing, is first in the DRF order and answers every offer of
the free cpu some way that uses nothing. What M answers should go to B, the next in
order."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from protocol.wire.messages import Offer
from protocol.wire.resources import Resources

from harness.fakes import FakeFramework
from harness.helpers import eventually
from harness.master import Cluster

Answer = Callable[[FakeFramework, Offer], Awaitable[None]]


async def answer_repeatedly(
    cluster: Cluster, answer: Answer, answers: int
) -> tuple[FakeFramework, FakeFramework]:
    """(B, M) once B has been offered the free cpu, or M has answered it `answers`
    times."""
    b = await cluster.framework("B", role="b")
    s1 = await cluster.slave("s1", Resources(cpus=4, mem=4096))
    offer = await b.next_offer()
    await b.accept(offer, [b.task(offer, Resources(cpus=3, mem=3072))], refuse=0.01)
    await s1.run_task()  # B runs 3 of 4 cpus and wants more: 1 cpu is free
    m = await cluster.framework("M", role="m")  # M holds nothing: first in order
    for n in range(answers):
        await answer(m, await m.next_offer(n))
        # (what it answered goes to one of the two: B, or M again)
        await eventually(lambda n=n: b.offer_count() > 1 or m.offer_count() > n + 1)
        if b.offer_count() > 1:
            break
    return b, m
