"""Each principal's queue into the master, served fairly: each principal's calls in its
turn, by weight and by the time they cost, so that one principal's backlog does not hold
the others up."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from master.intake.queues import QUANTUM, PrincipalQueues
from master.rate_limits import RateLimits
from protocol.transport.aio import within

from harness.helpers import eventually

Handle = Callable[[str, bytes], Awaitable[None]]


class Intake:
    """Payloads put in the queues as the master's intake puts them (a framework's held
    to a limit it never reaches, so that its calls waiting are counted)."""

    def __init__(self, handle: Handle, clock: Callable[[], float] = time.perf_counter) -> None:
        self.handle = handle
        self.queues = PrincipalQueues(RateLimits.defaults(1e9, None), clock=clock)

    def put(self, key: str, weight: float, topic: str, payload: bytes, calls: int) -> None:
        kind, principal = key.split("/")

        async def serve() -> None:
            await self.handle(topic, payload)

        self.queues.put(key, weight, None if kind == "slave" else principal, calls, serve)


class Served:
    """A handler whose payloads cost the time they name (b"3": 3 quanta) on a fake clock."""

    def __init__(self, expected: int) -> None:
        self.now = 0.0
        self.order: list[str] = []
        self.expected = expected
        self.done = asyncio.Event()

    def clock(self) -> float:
        return self.now

    async def __call__(self, topic: str, payload: bytes) -> None:
        self.now += int(payload) * QUANTUM
        self.order.append(topic)
        if len(self.order) == self.expected:
            self.done.set()


async def test_a_principals_payloads_keep_their_order() -> None:
    served = Served(expected=20)
    intake = Intake(served, served.clock)
    for i in range(10):
        intake.put("framework/a", 1, f"a{i}", b"1", 1)
        intake.put("framework/b", 1, f"b{i}", b"1", 1)
    await within(served.done.wait(), 10)
    assert [t for t in served.order if t[0] == "a"] == [f"a{i}" for i in range(10)]
    assert [t for t in served.order if t[0] == "b"] == [f"b{i}" for i in range(10)]
    await intake.queues.close()


async def test_a_backlog_does_not_hold_up_a_call_that_comes_after_it() -> None:
    served = Served(expected=101)
    intake = Intake(served, served.clock)
    for i in range(100):
        intake.put("framework/flood", 1, f"f{i}", b"1", 200)
    assert intake.queues.waiting("flood") == 20_000
    intake.put("slave/s", 8, "heartbeat", b"1", 1)
    assert intake.queues.backlog() == 101
    await within(served.done.wait(), 10)
    assert served.order.index("heartbeat") <= 2  # not behind the hundred
    assert intake.queues.waiting("flood") == 0
    await intake.queues.close()


async def test_backlogged_principals_share_the_time_by_weight_whatever_their_calls_cost() -> None:
    served = Served(expected=400)
    intake = Intake(served, served.clock)
    for _ in range(200):
        intake.put("framework/dear", 1, "dear", b"4", 1)  # each costs four times as much
        intake.put("slave/s", 8, "slave", b"1", 1)
    await within(served.done.wait(), 10)
    first = served.order[:150]  # while both still had a backlog
    time_dear, time_slave = 4 * first.count("dear"), first.count("slave")
    assert 6 <= time_slave / time_dear <= 10  # 8 to 1, give or take a payload a round
    await intake.queues.close()


async def test_what_arrives_while_a_principals_last_payload_is_handled_is_served_too() -> None:
    served = Served(expected=3)
    intake = Intake(served, served.clock)

    async def handle(topic: str, payload: bytes) -> None:
        if topic == "a0":  # its queue is empty now: more comes while it is handled
            intake.put("framework/a", 1, "a1", b"1", 1)
            await asyncio.sleep(0)
            intake.put("framework/b", 1, "b0", b"1", 1)
        await served(topic, payload)

    intake.handle = handle
    intake.put("framework/a", 1, "a0", b"1", 1)
    await within(served.done.wait(), 10)
    assert sorted(served.order) == ["a0", "a1", "b0"]
    assert intake.queues.backlog() == 0
    assert intake.queues.oldest_age() == 0
    await intake.queues.close()


async def test_a_payloads_wait_counts_from_its_sending_once_a_probe_says_so() -> None:
    """A payload read now was in the socket behind the rest: once the master's lag probe,
    sent `t` ago, comes back behind it, its age is at least `t` (else a master behind
    forgets the socket's part of its backlog once it has read it), and so is the age of
    the payload being handled; what is read after the probe counts from its reading."""
    release = asyncio.Event()
    handling = asyncio.Event()
    h1_done = asyncio.Event()

    async def handle(topic: str, payload: bytes) -> None:
        handling.set()
        await release.wait()
        if topic == "h1":
            h1_done.set()

    intake = Intake(handle)
    intake.put("slave/s", 8, "h0", b"", 1)
    intake.put("slave/s", 8, "h1", b"", 1)
    await handling.wait()  # h0 is being handled, h1 waits
    assert intake.queues.oldest_age() < 1.0
    intake.queues.sent_by(time.monotonic() - 5.0)  # a probe sent 5 s ago came back behind both
    assert 5.0 <= intake.queues.oldest_age() < 6.0
    intake.put("framework/f", 1, "f0", b"", 1)  # read after the probe: its own age
    release.set()
    await within(h1_done.wait(), 10)
    assert intake.queues.oldest_age() < 1.0  # only f0 is left, read just now (or being handled)
    await intake.queues.close()


def _recording(order: list[str], name: str) -> Callable[[], Awaitable[None]]:
    async def work() -> None:
        order.append(name)

    return work


async def test_an_idle_intake_handles_what_arrives_at_once_and_its_server_waits_for_it() -> None:
    """With nothing waiting and nothing being handled, what arrives is handled in its
    arrival's task (no turn of the loop to hand it over); what arrives meanwhile waits
    for its end, then is served in turn; while it runs, nothing else is handled at once."""
    order: list[str] = []
    release = asyncio.Event()
    queues = PrincipalQueues(RateLimits.defaults(1e9, None))
    assert await queues.serve_now("slave/s", 8, _recording(order, "s0"))
    assert order == ["s0"]  # handled before serve_now returned

    async def first() -> None:
        order.append("a0 begins")
        queues.put("framework/a", 1, "a", 1, _recording(order, "a1"))  # behind it
        queues.put("framework/b", 1, "b", 1, _recording(order, "b0"))
        await release.wait()
        order.append("a0 ends")

    inline = asyncio.create_task(queues.serve_now("framework/a", 1, first))
    for _ in range(5):
        await asyncio.sleep(0)
    assert order == ["s0", "a0 begins"]  # the server waits for it
    assert not await queues.serve_now("framework/c", 1, _recording(order, "c0"))
    assert queues.oldest_age() > 0  # (it is being handled: the lag probe sees it)
    release.set()
    assert await within(inline, 10)
    await eventually(lambda: len(order) == 5)
    assert order[:3] == ["s0", "a0 begins", "a0 ends"]
    assert sorted(order[3:]) == ["a1", "b0"]  # (c0 was not taken: its caller queues it)
    await queues.close()


async def test_a_call_held_for_its_limit_while_handled_at_once_is_served_in_turn() -> None:
    now = [0.0]
    order: list[str] = []
    queues = PrincipalQueues(RateLimits.defaults(1.0, None), rate_clock=lambda: now[0])

    async def two_calls() -> None:  # (a payload of two calls: the bucket pays for one)
        for name in ("c0", "c1"):
            await queues.charge("framework/f", "f", 1.0, _recording(order, name))

    assert await queues.serve_now("framework/f", 1, two_calls)
    assert order == ["c0"]  # c1 waits for the bucket
    assert queues.waiting("f") == 1
    now[0] += 1.0  # a second later: the bucket pays for it
    await eventually(lambda: order == ["c0", "c1"])
    assert queues.counts["f"].throttled == 1
    assert queues.waiting("f") == 0
    await queues.close()
