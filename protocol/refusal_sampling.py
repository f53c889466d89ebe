"""A flood of bad calls must not become a flood of log lines or answers: each sender
gets a few lines a second (each saying how many were left out since its last one, by
code) and a few hundred answers a second. The master samples its refusals of a
principal's calls so (master.outbox, master.http.log), and the slave its refusals of a
tenant's executor (slave.executor_side)."""

from __future__ import annotations

from collections import Counter
from typing import Any


class RateLimiter:
    """A token bucket per principal: `rate` a second, `burst` at once. It samples what a
    flood of bad calls would otherwise multiply (log lines, answers); the calls themselves
    are throttled by `master.intake`."""

    def __init__(self, rate: float | None, burst: float) -> None:
        self.rate = rate
        self.burst = max(1.0, burst)
        self._buckets: dict[str, tuple[float, float]] = {}  # principal -> (tokens, at)
        self._skipped: dict[str, int] = {}

    def admit(self, principal: str, now: float, cost: float = 1.0) -> bool:
        if not self.rate:
            return True
        tokens, at = self._buckets.get(principal, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.rate)
        if tokens < cost:
            self._buckets[principal] = (tokens, now)
            self._skipped[principal] = self._skipped.get(principal, 0) + 1
            return False
        self._buckets[principal] = (tokens - cost, now)
        return True

    def take_skipped(self, principal: str) -> int:
        """How many were refused for `principal` since this was last asked."""
        return self._skipped.pop(principal, 0)

    def forget(self, principal: str) -> None:
        """Forget `principal`'s bucket (it starts full again if it comes back)."""
        self._buckets.pop(principal, None)
        self._skipped.pop(principal, None)


class RefusalSampling:
    def __init__(self, most_keys: int | None = None) -> None:
        """`most_keys`: whom lines are counted for, at most (None: no bound, for principals,
        whom the principals file bounds); past it the longest unheard of with nothing
        left out is forgotten (a client address: anybody who reaches a port has one)."""
        self.lines = RateLimiter(rate=5.0, burst=20.0)
        self.answers = RateLimiter(rate=500.0, burst=1000.0)
        # lines left out since a principal's last one, by code
        self.unlogged: dict[str, Counter[str]] = {}
        # of those, the last one's code and what its line would have said (`due`)
        self.last: dict[str, tuple[str, dict[str, Any]]] = {}
        self._most_keys = most_keys
        self._keys: dict[str, None] = {}  # (with most_keys) oldest heard of first

    def line(
        self, principal: str, code: str, now: float, said: dict[str, Any] | None = None
    ) -> dict[str, Any] | None:
        """May a line about `principal` be logged now? If so, the fields saying how many
        were left out since its last one, by code; if not, None, and this one is counted
        (and `said`, what its line would say, kept for `due`)."""
        if self._most_keys is not None:
            self._remember(principal)
        if not self.lines.admit(principal, now):
            self.unlogged.setdefault(principal, Counter())[code] += 1
            self.last[principal] = (code, said or {})
            return None
        self.lines.take_skipped(principal)  # (counted here, by code)
        self.last.pop(principal, None)
        left_out = self.unlogged.pop(principal, Counter())
        return {"unlogged": left_out.total(), "unlogged_by_code": dict(left_out)}

    def due(self, now: float) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
        """The lines left out that may be logged now, one a sender whose rate lets it:
        its last one left out (what it would have said), with how many before it were
        left out, by code -- so that a burst that stops is told whole, not only with its
        sender's next line, which may never come."""
        out = []
        for key in [k for k in self.unlogged if self.lines.admit(k, now)]:
            self.lines.take_skipped(key)
            left_out = self.unlogged.pop(key)
            code, said = self.last.pop(key, ("", {}))
            left_out[code] -= 1
            left_out = +left_out  # (those at 0 dropped)
            out.append(
                (key, said, {"unlogged": left_out.total(), "unlogged_by_code": dict(left_out)})
            )
        return out

    def _remember(self, key: str) -> None:
        """`key` heard of now; past `most_keys`, the longest unheard of with nothing left
        out is forgotten (else the longest unheard of: its count is lost then, the bound
        kept): a flood of new addresses does not wipe out a guesser's count."""
        kept = self._keys
        kept.pop(key, None)
        kept[key] = None
        assert self._most_keys is not None
        while len(kept) > self._most_keys:
            quiet = next((k for k in kept if k not in self.unlogged and k != key), None)
            forgotten = quiet if quiet is not None else next(iter(kept))
            del kept[forgotten]
            self.lines.forget(forgotten)
            self.unlogged.pop(forgotten, None)
            self.last.pop(forgotten, None)

    def answer(self, principal: str, now: float) -> bool:
        """May `principal` be answered now?"""
        return self.answers.admit(principal, now)
