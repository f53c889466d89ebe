"""When a slave is worth another visit though nothing changed on it: a framework's decline
filter lapses, a hold (preemption's room) lapses, a retry of a slave nobody could take
is due. A heap of (when, slave), visited in time order by the rounds.

A filter replaced or cleared (a Revive) leaves its entry behind, there until its time: a
framework declining every offer for a year and reviving, round after round, left one a
decline, for a year. So past twice what was left by the last prune, the entries of
nothing still standing go (what stands: the allocator's filters and holds, asked then).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

Lapse = tuple[float, str]  # (when, slave id)
PRUNE_AT_LEAST = 1024  # entries before a prune is worth its walk


class Lapses:
    def __init__(self, standing: Callable[[], set[Lapse]]) -> None:
        """`standing`: the lapses of the filters and holds that stand now."""
        self._standing = standing
        self._heap: list[Lapse] = []
        self._kept = 0  # entries the last prune left
        self._retry_until = 0.0  # the latest retry asked for (retries are kept)

    def __len__(self) -> int:
        return len(self._heap)

    def at(self, when: float, slave_id: str) -> None:
        """Visit the slave at `when` (a filter or a hold of it lapses then)."""
        heapq.heappush(self._heap, (when, slave_id))
        if len(self._heap) > 2 * self._kept + PRUNE_AT_LEAST:
            self._prune()

    def retry(self, when: float, slave_id: str) -> None:
        """Visit the slave again at `when` whatever stands then."""
        self._retry_until = max(self._retry_until, when)
        self.at(when, slave_id)

    def due(self, now: float) -> list[str]:
        """The slaves whose lapses are due by `now` (taken off)."""
        heap = self._heap
        if not heap or heap[0][0] > now:
            return []  # (the usual, asked every round)
        due = []
        while heap and heap[0][0] <= now:
            due.append(heapq.heappop(heap)[1])
        return due

    def _prune(self) -> None:
        standing = self._standing()
        self._heap = [e for e in set(self._heap) if e in standing or e[0] <= self._retry_until]
        heapq.heapify(self._heap)
        self._kept = len(self._heap)
