"""The master's calls, served fairly between the principals that send them.

Every call reaches the master over its one MQTT connection, in the order the broker
delivers them: a tenant that floods would have everyone's calls (a slave's heartbeat,
another framework's launch) wait behind its backlog. So arriving payloads are only put in
their principal's queue here, undecoded (a flood costs the master an append, not a
decode), and one server takes them out by deficit round robin (Shreedhar and Varghese),
each principal's share of the master's time in proportion to its weight. The time a
payload costs is measured as it is handled, so a principal that sends dear calls gets
fewer of them, not more time. Within a principal its payloads keep their order.

A queue's length is bounded by its principal's rate limit capacity (see `LimitedCalls`):
past it, what arrives is refused unread. This module keeps time and queues; it decodes
and refuses nothing itself.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from protocol import logs
from protocol.transport.bus import cancel_and_wait

log = logs.get("fair_intake")

Handler = Callable[[str, bytes, Any], Awaitable[None]]
"""What serves a payload in its turn: its topic, the payload, and what it was put with
(the master's intake: its sender, read from the topic as it arrived)."""

QUANTUM = 0.002  # seconds of handling a weight-1 principal is given a round
TURN = 0.005  # seconds of serving before the loop lets its other tasks run


@dataclass
class _Queue:
    weight: float
    payloads: deque[tuple[float, int, str, bytes, int, Any]] = field(default_factory=deque)
    calls: int = 0  # the calls its payloads hold
    deficit: float = 0.0  # seconds of handling it may still take this round
    active: bool = False  # in the round (what arrives while its last is handled joins it)


class FairIntake:
    def __init__(self, handle: Handler, clock: Callable[[], float] = time.perf_counter) -> None:
        self.handle = handle
        self.clock = clock
        self._queues: dict[str, _Queue] = {}
        self._active: deque[str] = deque()  # principals with something queued, in turn
        self._wake = asyncio.Event()
        self._server: asyncio.Task[None] | None = None
        self._serving: tuple[float, int] | None = None  # the payload being handled
        self._seq = 0  # payloads put so far: each payload's number
        # (n, t): the payloads up to the n-th were sent by t (see sent_by)
        self._sent_by: deque[tuple[int, float]] = deque(maxlen=64)

    def put(
        self,
        principal: str,
        weight: float,
        topic: str,
        payload: bytes,
        calls: int,
        about: Any = None,
    ) -> None:
        """Queue a payload of `calls` calls from `principal` (served at `weight`); `about`
        is handed to the handler with it."""
        queue = self._queues.get(principal)
        if queue is None:
            queue = self._queues[principal] = _Queue(weight)
        queue.weight = weight
        if not queue.active:
            queue.active = True
            self._active.append(principal)
        self._seq += 1
        queue.payloads.append((time.monotonic(), self._seq, topic, payload, calls, about))
        queue.calls += calls
        self._wake.set()
        if self._server is None:
            self._server = asyncio.create_task(self._serve(), name="master-fair-intake")

    def waiting(self, principal: str) -> int:
        """The calls `principal` has waiting here."""
        queue = self._queues.get(principal)
        return queue.calls if queue is not None else 0

    def backlog(self) -> int:
        """Payloads waiting, all principals."""
        return sum(len(self._queues[p].payloads) for p in self._active)

    def oldest_age(self) -> float:
        """Seconds the oldest payload here has waited, the one being handled included
        (0: none): a payload's calls are handled one after another, and the last of a
        big one waits behind the rest (a slave process's heartbeats, its slaves'
        silence not theirs)."""
        heads = [q.payloads[0][:2] for q in map(self._queues.get, self._active) if q and q.payloads]
        if self._serving is not None:
            heads.append(self._serving)
        if not heads:
            return 0.0
        return time.monotonic() - min(self._sent_no_later(a, n) for a, n in heads)

    def sent_by(self, sent: float) -> None:
        """Everything put here so far was sent by `sent` (monotonic): the master's lag
        probe, sent then, came back behind it. A payload's wait then counts from its
        sending, not from when it was read: a master behind has its backlog in the
        socket first, and the time it waited there is not forgotten once it is read."""
        if self._seq:
            self._sent_by.append((self._seq, sent))

    def _sent_no_later(self, arrived: float, n: int) -> float:
        for up_to, sent in self._sent_by:  # (in order: the first that covers it is earliest)
            if up_to >= n:
                return min(arrived, sent)
        return arrived

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        turn_ends = loop.time() + TURN
        while True:
            if not self._active:
                self._wake.clear()
                await self._wake.wait()
                turn_ends = loop.time() + TURN
                continue
            principal = self._active[0]
            queue = self._queues[principal]
            if not queue.payloads:  # idle: out of the round; it neither banks time nor owes it
                queue.active, queue.deficit = False, 0.0
                self._active.popleft()
                continue
            if queue.deficit <= 0:  # its turn is over: the next one's, and more time later
                queue.deficit += QUANTUM * queue.weight
                self._active.rotate(-1)
                continue
            arrived, n, topic, payload, calls, about = queue.payloads.popleft()
            queue.calls -= calls
            started = self.clock()
            self._serving = (arrived, n)
            try:
                await self.handle(topic, payload, about)
            except Exception:  # (a handler's bug is logged there; this server goes on)
                log.exception("fair_intake.handler_failed", principal=principal)
            finally:
                self._serving = None
            queue.deficit -= self.clock() - started
            if loop.time() > turn_ends:  # a backlog must not starve rounds, timers, HTTP
                await asyncio.sleep(0)
                turn_ends = loop.time() + TURN

    async def close(self) -> None:
        """Stop serving (the master is stopping: what waits goes with its books)."""
        if self._server is not None:
            await cancel_and_wait(self._server)
            self._server = None
