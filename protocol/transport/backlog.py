"""The inbound queue, stamped: how far behind a party is in reading what reached it.

aiomqtt hands every arriving message to an asyncio queue that the bus empties one by
one (see `Bus._receive`). A party that cannot keep up shows it there first: the queue
grows and its oldest message ages. `StampedQueue` notes when each message was queued,
so the bus can say how many wait, how long the oldest has waited, and how long the last
one it took had waited (what Mesos calls master/event_queue_messages). Its one reader
waits for an arrival with `arrival()`, woken in the loop's next turn (asyncio.Queue's
`get()` in a task of its own, beside the connection's end, took three turns and a task).
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections import deque
from collections.abc import Sequence
from typing import Any


class StampedQueue(asyncio.Queue[Any]):
    """An asyncio queue that remembers when each item was put (aiomqtt's `queue_type`)."""

    def __init__(self, maxsize: int = 0) -> None:
        super().__init__(maxsize)
        self._stamps: deque[float] = deque()
        self.last_wait = 0.0  # seconds the item taken last had waited
        self._reader: asyncio.Future[None] | None = None  # the reader waiting (arrival)
        self._putting_first = False  # (put_first's items go to the heap)

    def _init(self, maxsize: int) -> None:
        self._items: deque[Any] = deque()
        self._queue = self._items  # (asyncio.Queue's own)
        # put_first's: (arrival number, when it arrived, item), a heap taken before the rest
        self._firsts: list[tuple[int, float, Any]] = []

    def qsize(self) -> int:
        return len(self._items) + len(self._firsts)

    def empty(self) -> bool:
        return not self._items and not self._firsts

    def _put(self, item: Any) -> None:
        if self._putting_first:
            heapq.heappush(self._firsts, item)
        else:
            self._stamps.append(time.monotonic())
            self._items.append(item)
        self.wake()

    def put_first(self, items: Sequence[tuple[int, float, Any]]) -> None:
        """Put `items` ahead of every item waiting, each (its arrival number, the monotonic
        time it arrived, the item): what a transport kept for a handler not there yet
        (`protocol.transport.unheard`) goes before what arrived after it, and among
        everything put first, in the order it arrived, whichever handler came first."""
        self._putting_first = True
        try:
            for entry in items:
                self.put_nowait(entry)
        finally:
            self._putting_first = False

    async def arrival(self) -> None:
        """Return once an item is put (or `wake` is called): what the queue's one reader
        awaits when it finds the queue empty."""
        reader = self._reader = asyncio.get_running_loop().create_future()
        try:
            await reader
        finally:
            self._reader = None

    def wake(self) -> None:
        """Wake the reader waiting in `arrival`, if one is (its connection ended)."""
        reader = self._reader
        if reader is not None and not reader.done():
            reader.set_result(None)

    def _get(self) -> Any:
        if self._firsts:
            _, when, item = heapq.heappop(self._firsts)
            self.last_wait = time.monotonic() - when
            return item
        if self._stamps:
            self.last_wait = time.monotonic() - self._stamps.popleft()
        return self._items.popleft()

    def oldest_age(self) -> float:
        """Seconds the oldest waiting item has waited (0 with none waiting)."""
        if self._firsts:  # (each arrived before everything else waiting)
            return time.monotonic() - self._firsts[0][1]
        return time.monotonic() - self._stamps[0] if self._stamps else 0.0
