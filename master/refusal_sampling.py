"""What a principal hears of its calls refused for its rate limit (`RateLimitedTold`);
the sampling of the master's refusal lines and answers (`RefusalSampling`) is shared
with the slave, in protocol.refusal_sampling."""

from __future__ import annotations

from collections import Counter

from protocol.refusal_sampling import RateLimiter, RefusalSampling

__all__ = ["TOLD_BURST", "TOLD_RATE", "RateLimitedTold", "RateLimiter", "RefusalSampling"]

TOLD_RATE = 2.0  # errors a second telling a principal of its calls refused for its limit
TOLD_BURST = 10.0  # (and at once, after a quiet while)


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
