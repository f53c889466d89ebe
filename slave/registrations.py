"""A fleet's (re-)registrations, paced in one loop rather than one a slave.

Every slave of a process wants to (re-)register at once: at its start, after a reconnect,
and when a new master leads. Each still waits its own random time in [0, factor] before
its first attempt and backs off between retries (`slave.backoff`, Mesos's
`--registration_backoff_factor`), but one loop sends what is due a tick at a time, so
the attempts of a tick leave as one payload (the bus batches a turn's posts to a topic),
and 4,000 slaves are not 4,000 tasks each waking for its own timer.

A retry is worth sending only if the attempt before it was lost. The master reads a
principal's calls in the order sent, so while it is answering attempts this process sent
before a slave's (answers came lately, none to one sent after it) that slave's attempt
is in its backlog, not lost: its retry waits (the ack timeout grows with the master's
backlog). Once the master answered an attempt sent after it, or nothing has been
answered since it was sent or for a while (a master gone, or stuck), it goes at its
backoff's time. A
new leader's backlog of 100,000 re-registrations read 5% more than the slaves, each
retry admitted again.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from slave.backoff import RegistrationBackoff

TICK = 0.1  # seconds: attempts due within one go together
ANSWERING = 5.0  # seconds: answers this recent say the master is reading this process's calls
HOLD = 1.0  # seconds a retry held for the master's backlog waits before it is looked at again


class Registrant(Protocol):
    """A slave's registration as the pacer sees it (slave.registration.Registration)."""

    registered: asyncio.Event
    ended: asyncio.Event

    async def announce(self) -> None: ...


@dataclass
class Attempt:
    backoff: RegistrationBackoff
    due: float  # (monotonic) when the next attempt goes, or a held retry is looked at again
    sent_at: float | None = None  # when the last attempt went (None: not yet)
    number: int = 0  # the last attempt's place in what this process sent (from 1)


class Registrations:
    def __init__(self, factor: float, connected: Callable[[], bool]) -> None:
        self.factor = factor
        self.connected = connected  # whether the bus is connected (else nothing is sent)
        self.pending: dict[Registrant, Attempt] = {}  # the slaves not registered yet
        self._heap: list[tuple[float, int, Registrant]] = []
        self._pushes = itertools.count()  # (ties in the heap never compare slaves)
        self._newest_answered = 0  # the number of the newest attempt answered
        self._last_answer = float("-inf")  # when the last answer came
        self.sent = 0  # attempts sent
        self.held = 0  # retries held back while the master read this process's backlog

    def wanted(self, slave: Registrant) -> None:
        """`slave` is to (re-)register: afresh, after its random wait."""
        backoff = RegistrationBackoff(self.factor)
        attempt = Attempt(backoff, time.monotonic() + backoff.first())
        self.pending[slave] = attempt
        self._push(slave, attempt)

    def answered(self, slave: Registrant) -> None:
        """The master registered `slave`."""
        now = time.monotonic()
        self._last_answer = now
        attempt = self.pending.pop(slave, None)
        if attempt is not None:
            self._newest_answered = max(self._newest_answered, attempt.number)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(TICK)
            await self.send_due(time.monotonic())

    async def send_due(self, now: float) -> None:
        """Send every attempt due by `now` (a held retry only once it is worth it)."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            due, _, slave = heapq.heappop(heap)
            attempt = self.pending.get(slave)
            if attempt is None or attempt.due != due:
                continue  # (registered since, or wanted afresh: another entry is its own)
            if slave.registered.is_set() or slave.ended.is_set():
                del self.pending[slave]
                continue
            if attempt.sent_at is not None and self._in_backlog(attempt, now):
                self.held += 1
                attempt.due = now + HOLD
            else:
                if self.connected():
                    await slave.announce()
                    self.sent += 1
                    attempt.sent_at, attempt.number = now, self.sent
                attempt.due = now + attempt.backoff.retry()
            self._push(slave, attempt)

    def _in_backlog(self, attempt: Attempt, now: float) -> bool:
        """Whether `attempt` is still in the master's backlog: the master has been
        answering this process's attempts since it was sent, lately, and none sent after
        it yet (answers from before it was sent may be a master that is gone since)."""
        assert attempt.sent_at is not None
        answering = attempt.sent_at < self._last_answer > now - ANSWERING
        return answering and self._newest_answered < attempt.number

    def _push(self, slave: Registrant, attempt: Attempt) -> None:
        heapq.heappush(self._heap, (attempt.due, next(self._pushes), slave))
