"""Review 61 (on e0a44dc): what an idle intake handles at once is not charged to its
principal's deficit, so a principal whose dear payload arrives at a quiet moment has its
next one served ahead of another principal's call that waited for it.

The deficit round robin charges each entry the time its handling took
(`queue.deficit -= clock() - started` in `PrincipalQueues._serve`): a principal that
spent 50 ms with the master waits for the others' turns before its next entry. What
`serve_now` handles is charged nothing. Below: A's payload takes 50 ms (25 quanta); while
it is handled A's next payload and B's call arrive. Served by the server (the control,
`put`), B's call goes first; handled at once (`serve_now`), A's next goes first: A has
100 ms of the master's time before B's 1 call, where the queues give it 50 ms.

On the queues alone, with a clock the work advances."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from master.intake.queues import QUANTUM, PrincipalQueues
from master.rate_limits import RateLimits

from harness.helpers import eventually

COST = 0.05  # seconds A's dear payloads take, each


async def _order(inline: bool) -> list[str]:
    now = [0.0]
    order: list[str] = []
    queues = PrincipalQueues(RateLimits.defaults(1e9, None), clock=lambda: now[0])

    def cheap(name: str) -> Callable[[], Awaitable[None]]:
        async def work() -> None:
            order.append(name)

        return work

    async def dear_next() -> None:
        order.append("a1")
        now[0] += COST

    async def dear_first() -> None:
        order.append("a0")
        queues.put("framework/a", 1, "a", 1, dear_next)  # arrive while it is handled
        queues.put("framework/b", 1, "b", 1, cheap("b0"))
        now[0] += COST

    if inline:
        assert await queues.serve_now("framework/a", 1, dear_first)
    else:
        queues.put("framework/a", 1, "a", 1, dear_first)
    await eventually(lambda: len(order) == 3)
    await queues.close()
    return order


async def test_what_an_idle_intake_handles_at_once_is_charged_as_the_server_charges_it() -> None:
    assert COST > 2 * QUANTUM
    served = await _order(inline=False)
    assert served == ["a0", "b0", "a1"]  # the queues' fairness: B's call before A's next
    handled_at_once = await _order(inline=True)
    assert handled_at_once == served, (
        f"A's payload of {COST * 1000:g} ms handled at once was charged nothing: A's next "
        f"payload ({COST * 1000:g} ms more) went before B's call, which waited "
        f"{2 * COST * 1000:g} ms of A's handling where the queues give it {COST * 1000:g} "
        f"(order {handled_at_once}, served by the server {served})"
    )
