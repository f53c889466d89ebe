"""A flood of bad calls must not become a flood of log lines or answers: each principal
gets a few lines a second (each saying how many were left out since its last one, by
code) and a few hundred answers a second."""

from __future__ import annotations

from collections import Counter
from typing import Any

from master.authz import RateLimiter

TOLD_RATE = 2.0  # errors a second telling a principal of its calls refused for its limit
TOLD_BURST = 10.0  # (and at once, after a quiet while)


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


class RateLimitedTold:
    """What a sender hears of its calls refused for its rate limit: a flood's refusals,
    hundreds of thousands a minute, would be a flood of errors back (one to each was 300
    a second to a flooder here). So an error a call while few are refused (a burst of
    TOLD_BURST), then TOLD_RATE a second, each telling every call refused since the last
    one, by call."""

    def __init__(self) -> None:
        self.limiter = RateLimiter(rate=TOLD_RATE, burst=TOLD_BURST)
        self.untold: dict[str, Counter[str]] = {}  # refused since the last error, by call

    def tell(self, principal: str, calls: Counter[str], now: float) -> Counter[str] | None:
        """`calls` of `principal` were refused: if it may hear now, every refused call it
        has not heard of (these too), by call; else None, and they wait for the next."""
        untold = self.untold.setdefault(principal, Counter())
        untold.update(calls)
        if not self.limiter.admit(principal, now):
            return None
        self.limiter.take_skipped(principal)
        return self.untold.pop(principal)
