"""A flood of bad calls must not become a flood of log lines or answers: each principal
gets a few lines a second (each saying how many were left out since its last one, by
code) and a few hundred answers a second."""

from __future__ import annotations

from collections import Counter
from typing import Any

from master.authz import RateLimiter


class RefusalSampling:
    def __init__(self) -> None:
        self.lines = RateLimiter(rate=5.0, burst=20.0)
        self.answers = RateLimiter(rate=500.0, burst=1000.0)
        # lines left out since a principal's last one, by code
        self.unlogged: dict[str, Counter[str]] = {}

    def line(self, principal: str, code: str, now: float) -> dict[str, Any] | None:
        """May a line about `principal` be logged now? If so, the fields saying how many
        were left out since its last one, by code; if not, None, and this one is counted."""
        if not self.lines.admit(principal, now):
            self.unlogged.setdefault(principal, Counter())[code] += 1
            return None
        self.lines.take_skipped(principal)  # (counted here, by code)
        left_out = self.unlogged.pop(principal, Counter())
        return {"unlogged": left_out.total(), "unlogged_by_code": dict(left_out)}

    def answer(self, principal: str, now: float) -> bool:
        """May `principal` be answered now?"""
        return self.answers.admit(principal, now)
