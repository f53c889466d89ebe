"""Every call's one way into the master, by the bus or by another door: who sent it, read
once; one admission check against its principal's rate limit; one queue per principal,
served fairly between principals and at each one's rate limit; then its handler.

- `call_intake`: arrival, decoding, routing, charging and handling (`CallIntake`);
- `queues`: each principal's queue, the fair server and the rate limits' buckets;
- `costs`: what a call costs its limit, and what is read past it;
- `refusals`: what a principal past its capacity is told, and what is undone for it.
"""

from master.intake.call_intake import MAX_CALL_BYTES, MAX_CALL_ITEMS, CallIntake, Route, Routes
from master.intake.queues import PrincipalCounts, PrincipalQueues
from master.intake.refusals import RateLimitRefusals

__all__ = [
    "MAX_CALL_BYTES",
    "MAX_CALL_ITEMS",
    "CallIntake",
    "PrincipalCounts",
    "PrincipalQueues",
    "RateLimitRefusals",
    "Route",
    "Routes",
]
