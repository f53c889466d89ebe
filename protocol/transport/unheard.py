"""What arrives for a topic no handler takes yet, kept for the handler that will.

A party with a persistent session (a slave process, the masters' one session) is sent,
by the broker, what was queued for it while it was away the moment it connects: before
its code has subscribed or routed a handler for its topics. A transport keeps such
messages here and, once a handler is subscribed or routed for their topic, hands them to
it through its one dispatch path (put first in its `StampedQueue`), in the order they
arrived and before anything of their topic that arrived after them (`Bus._release`; the
in-process transport does the same).

Kept is bounded: at most `MAX_MESSAGES` payloads and `MAX_BYTES` bytes (as much as a
broker we start queues for one client: `protocol.tooling.brokers.QueueBounds`), each for
`HOLD_FOR` seconds. What is dropped (nobody took it in time, or there was no room) is
counted in `messages.outcomes` as (type, "dropped", "unheard" or "no-room") and said once
a topic: a flood to a topic nobody reads must not flood the log.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

from protocol.transport.message_counts import MessageCounts
from protocol.wire.codec import DecodeError, decode_many

HOLD_FOR = 60.0  # seconds a message waits for its handler (a master's takeover, a fleet's start)
MAX_MESSAGES = 101_000  # payloads kept (a broker queues 1,000 in flight and 100,000 behind)
MAX_BYTES = 48 * 1024 * 1024  # bytes kept (16 MiB in flight and 32 MiB behind)
MAX_TOLD = 4096  # topics whose drops were said (then said again, once each)
SWEEP = 1.0  # seconds at least between two looks for what waited too long


class Released(NamedTuple):
    """A payload kept here, handed back to its transport's dispatch (already counted as
    arrived there)."""

    topic: str
    payload: bytes


class Unheard:
    def __init__(self, log: Any, stats: dict[str, int], messages: MessageCounts) -> None:
        self.log = log
        self.stats = stats
        self.messages = messages
        # by topic, in arrival order: (arrival number, when it arrived, payload)
        self._by_topic: dict[str, deque[tuple[int, float, bytes]]] = {}
        self._order: deque[tuple[int, float, str]] = deque()  # all of them (some taken)
        self._arrivals = 0
        self._count = 0
        self._bytes = 0
        self._sweep: asyncio.TimerHandle | None = None
        self._told: set[str] = set()

    def __len__(self) -> int:
        return self._count

    def hold(self, topic: str, payload: bytes) -> None:
        """Keep `payload`, which arrived on `topic` with no handler for it, if there is room."""
        if self._count >= MAX_MESSAGES or self._bytes + len(payload) > MAX_BYTES:
            self._drop(topic, payload, "no-room")
            return
        self._arrivals += 1
        now = time.monotonic()
        self._by_topic.setdefault(topic, deque()).append((self._arrivals, now, payload))
        self._order.append((self._arrivals, now, topic))
        self._count += 1
        self._bytes += len(payload)
        if self._sweep is None:
            self._schedule()

    def take(self, heard: Callable[[str], bool]) -> list[tuple[int, float, Released]]:
        """What is kept for the topics `heard` now says a handler takes (a look at each
        topic, not each message), no longer kept: each with its arrival number and when it
        arrived (see `StampedQueue.put_first`), in arrival order."""
        topics = [topic for topic in self._by_topic if heard(topic)]
        return self._taken(topics)

    def take_topic(self, topic: str) -> list[tuple[int, float, Released]]:
        """What is kept for `topic` (a route's: one topic), as `take`."""
        return self._taken([topic] if topic in self._by_topic else [])

    def _taken(self, topics: list[str]) -> list[tuple[int, float, Released]]:
        entries: list[tuple[int, float, str, bytes]] = []
        for topic in topics:
            for n, when, payload in self._by_topic.pop(topic):
                entries.append((n, when, topic, payload))
                self._bytes -= len(payload)
        self._count -= len(entries)
        if not self._count:  # (nothing left to sweep)
            self._order.clear()
            self.close()
        if len(topics) > 1:
            entries.sort()
        return [(n, when, Released(topic, payload)) for n, when, topic, payload in entries]

    def close(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None

    def _schedule(self) -> None:
        due = self._order[0][1] + HOLD_FOR - time.monotonic()
        self._sweep = asyncio.get_running_loop().call_later(
            max(due, min(SWEEP, HOLD_FOR)), self._expire
        )

    def _expire(self) -> None:
        self._sweep = None
        cutoff = time.monotonic() - HOLD_FOR
        order = self._order
        while order and order[0][1] <= cutoff:
            n, _, topic = order.popleft()
            kept = self._by_topic.get(topic)
            if not kept or kept[0][0] != n:
                continue  # (taken by a handler since)
            _, _, payload = kept.popleft()
            if not kept:
                del self._by_topic[topic]
            self._count -= 1
            self._bytes -= len(payload)
            self._drop(topic, payload, "unheard")
        if order:
            self._schedule()

    def _drop(self, topic: str, payload: bytes, code: str) -> None:
        kinds: dict[str, int] = {}
        for item in decode_many(payload):
            kind = (item.type_name or "?") if isinstance(item, DecodeError) else item.message.TYPE
            kinds[kind] = kinds.get(kind, 0) + 1
        for kind, n in kinds.items():
            self.stats["received"] += n
            self.messages.received[kind] += n
            self.messages.outcomes[(kind, "dropped", code)] += n
        if topic in self._told:
            return
        if len(self._told) >= MAX_TOLD:
            self._told.clear()
        self._told.add(topic)
        self.log.warning(
            "bus.unheard_dropped",
            topic=topic,
            reason=code,
            types=sorted(kinds),
            detail=f"no handler took what arrived on this topic within {HOLD_FOR:g} s"
            if code == "unheard"
            else f"more than {MAX_MESSAGES} messages or {MAX_BYTES} bytes waited for "
            "their handlers",
        )  # (once a topic: messages.outcomes counts every one)
