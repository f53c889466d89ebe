"""When to tell a person what a party is waiting for: TELL_AFTER seconds into a wait (an
answer that comes sooner is no news), then every TELL_AGAIN seconds while it lasts, so
that a terminal left open shows the wait without filling up with it."""

from __future__ import annotations

import time
from collections.abc import Callable

TELL_AFTER = 2.0  # seconds into a wait before it is told
TELL_AGAIN = 10.0  # seconds between two tellings of one wait


class Patience:
    def __init__(
        self,
        after: float = TELL_AFTER,
        again: float = TELL_AGAIN,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.after, self.again, self.clock = after, again, clock
        self._since: float | None = None  # when the wait began
        self._told: float | None = None  # when it was last told

    def due(self) -> float | None:
        """Still waiting: the seconds waited if it is time to say so, else None."""
        now = self.clock()
        if self._since is None:
            self._since = now
        waited = now - self._since
        if waited < self.after or (self._told is not None and now - self._told < self.again):
            return None
        self._told = now
        return waited

    def over(self) -> None:
        """The wait ended: the next one starts afresh."""
        self._since = self._told = None
