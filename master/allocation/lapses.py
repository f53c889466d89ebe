"""When a slave is worth another visit though nothing changed on it: a framework's decline
filter lapses, a hold (preemption's room) lapses, a retry of a slave nobody could take
is due. The slaves due at each time, and a heap of the times, visited in time order by
the rounds.

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
        # the slaves to visit at each time, and a heap of those times: the filters one
        # round sets lapse at one time (its time and the refusal), so most entries join a
        # time already there -- a set's add, where a heap of (when, slave) took a push and
        # a pop each
        self._at: dict[float, set[str]] = {}
        self._times: list[float] = []
        self._entries = 0  # (when, slave) pairs kept
        self._kept = 0  # entries the last prune left
        self._retry_until = 0.0  # the latest retry asked for (retries are kept)

    def __len__(self) -> int:
        return self._entries

    def at(self, when: float, slave_id: str) -> None:
        """Visit the slave at `when` (a filter or a hold of it lapses then)."""
        slaves = self._at.get(when)
        if slaves is None:
            self._at[when] = {slave_id}
            heapq.heappush(self._times, when)
        elif slave_id in slaves:
            return
        else:
            slaves.add(slave_id)
        self._entries += 1
        if self._entries > 2 * self._kept + PRUNE_AT_LEAST:
            self._prune()

    def retry(self, when: float, slave_id: str) -> None:
        """Visit the slave again at `when` whatever stands then."""
        self._retry_until = max(self._retry_until, when)
        self.at(when, slave_id)

    def due(self, now: float) -> list[str]:
        """The slaves whose lapses are due by `now` (taken off)."""
        times = self._times
        if not times or times[0] > now:
            return []  # (the usual, asked every round)
        due: list[str] = []
        while times and times[0] <= now:
            slaves = self._at.pop(heapq.heappop(times))
            self._entries -= len(slaves)
            due.extend(slaves)
        return due

    def _prune(self) -> None:
        standing, retry_until = self._standing(), self._retry_until
        kept: dict[float, set[str]] = {}
        for when, slaves in self._at.items():
            left = {s for s in slaves if when <= retry_until or (when, s) in standing}
            if left:
                kept[when] = left
        self._at, self._times = kept, list(kept)
        heapq.heapify(self._times)
        self._kept = self._entries = sum(map(len, kept.values()))
