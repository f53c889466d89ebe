"""Framework rate limiting as Mesos does it: throttle, don't drop.

Each queue (a principal's own, or the one the principals under the aggregate default
share) is a token bucket of `qps` calls a second, one second's worth at once. A call the
bucket can pay for now is handled now; one it cannot waits in the queue, and the queue is
handled in order as the bucket fills. Only past the queue's `capacity` is a call refused,
and the master then undoes what it would have held (see `Master._over_capacity`).

A call is charged by what it costs the master to answer, at least 1: a Reconcile one, and
one more per RECONCILE_TASKS_PER_CHARGE tasks it asks about (each is answered with an
update, which the bus sends in lists: at one per task, a framework's 100,000 tasks took
100 s of its limit to reconcile after a failover, with every other call of it waiting
behind), an Accept one, and one more per ACCEPT_TASKS_PER_CHARGE tasks (launching is the
cluster's work, which DRF shares out, and an SDK framework at full speed launches tens of
tasks an Accept; but a thousand tasks the master must refuse one by one are not one
call). A bucket may go into debt for a big call, and the calls behind it wait the debt
off, so one huge message cannot dodge the limit.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import Enum

from master.rate_limits import Limit, RateLimits
from protocol import logs
from protocol.transport.aio import cancel_and_wait
from protocol.wire.messages import (
    Accept,
    Acknowledge,
    Acknowledges,
    Decline,
    Error,
    Reconcile,
    Suppress,
    Teardown,
    Wire,
)

log = logs.get("throttle")

Work = Callable[[], Awaitable[None]]


# What gives the cluster back (resources, bookkeeping) is never held up or charged: a
# limit must not cost the cluster offers that sit unanswered or updates re-sent.
FREE = (Acknowledge, Decline, Suppress, Teardown, Error)
# What must be read even when its queue is full: the free calls, and an Accept (its refusal
# gives its offers back). Anything else is refused unread then: a flood costs little.
READ_WHEN_FULL = frozenset({*(t.TYPE for t in FREE), Acknowledges.TYPE, Accept.TYPE})


ACCEPT_TASKS_PER_CHARGE = 100
RECONCILE_TASKS_PER_CHARGE = 10  # 100,000 tasks: 10 s of the default limit


def call_cost(message: Wire) -> float | None:
    """What a call is charged (see the module's docstring); None if free. (An implicit
    Reconcile asks for all the framework's tasks: the master charges that.)"""
    if isinstance(message, FREE):
        return None
    if isinstance(message, Accept):  # no tasks: the offers given back, free
        return 1.0 + len(message.tasks) // ACCEPT_TASKS_PER_CHARGE if message.tasks else None
    if isinstance(message, Reconcile):
        return reconcile_cost(len(message.tasks))
    return 1.0


def reconcile_cost(tasks: int) -> float:
    """What reconciling `tasks` tasks is charged (an implicit Reconcile: all of them)."""
    return 1.0 + tasks // RECONCILE_TASKS_PER_CHARGE


class Verdict(Enum):
    NOW = "now"  # the caller handles it at once
    QUEUED = "queued"  # the throttle handles it when the rate allows
    REFUSED = "refused"  # the queue is full


@dataclass
class PrincipalCounts:
    handled: int = 0  # calls charged to the limit and handled
    throttled: int = 0  # of those, the ones that waited in the queue
    refused: int = 0  # calls refused, the queue full
    queued: int = 0  # waiting now


@dataclass
class _Queue:
    limit: Limit
    tokens: float
    at: float
    calls: deque[tuple[float, str, Work]] = field(default_factory=deque)
    drainer: asyncio.Task[None] | None = None

    def refill(self, now: float) -> None:
        assert self.limit.qps is not None
        self.tokens = min(self.limit.burst, self.tokens + (now - self.at) * self.limit.qps)
        self.at = now

    def wait(self, now: float) -> float:
        """Seconds until the bucket can pay for the next call (0: now)."""
        self.refill(now)
        assert self.limit.qps is not None
        return max(0.0, (1.0 - self.tokens) / self.limit.qps)


class Throttle:
    def __init__(self, limits: RateLimits, clock: Callable[[], float]) -> None:
        self.limits = limits
        self.clock = clock
        self._queues: dict[str, _Queue] = {}
        self.counts: dict[str, PrincipalCounts] = {}

    def submit(self, principal: str, cost: float, work: Work) -> Verdict:
        """Charge `cost` to `principal`'s limit: handle now, queue `work`, or refuse."""
        key, limit = self.limits.for_principal(principal)
        counts = self.counts.setdefault(principal, PrincipalCounts())
        if limit.qps is None:
            return Verdict.NOW  # not limited (nor counted: nothing to show)
        now = self.clock()
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = _Queue(limit, limit.burst, now)
        queue.limit = limit  # (the operator may have changed it: what waits keeps its place)
        if not queue.calls and queue.drainer is None and queue.wait(now) == 0:
            queue.tokens -= max(1.0, cost)
            counts.handled += 1
            return Verdict.NOW
        if limit.capacity is not None and len(queue.calls) >= limit.capacity:
            counts.refused += 1
            return Verdict.REFUSED
        queue.calls.append((max(1.0, cost), principal, work))
        counts.queued += 1
        if queue.drainer is None:
            queue.drainer = asyncio.create_task(self._drain(queue), name=f"throttle-{key}")
        return Verdict.QUEUED

    def full(self, principal: str, calls: int = 1) -> bool:
        """Whether `principal`'s next `calls` charged calls would not all fit in its
        queue (some would be refused)."""
        key, limit = self.limits.for_principal(principal)
        queue = self._queues.get(key)
        if limit.capacity is None or limit.qps is None or queue is None:
            return False
        return len(queue.calls) + calls > limit.capacity and (
            bool(queue.calls) or queue.drainer is not None or queue.wait(self.clock()) > 0
        )

    def refused_unread(self, principal: str, calls: int) -> None:
        self.counts.setdefault(principal, PrincipalCounts()).refused += calls

    async def _drain(self, queue: _Queue) -> None:
        """Handle the queue in order, each call when the bucket can pay for it."""
        try:
            while queue.calls:
                wait = queue.wait(self.clock())
                if wait > 0:
                    await asyncio.sleep(wait)  # the rate itself: the time a token takes
                    continue
                cost, principal, work = queue.calls.popleft()
                queue.tokens -= cost
                counts = self.counts[principal]
                counts.queued -= 1
                counts.handled += 1
                counts.throttled += 1
                try:
                    await work()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("throttle.call_failed", principal=principal)
        finally:
            queue.drainer = None

    def limit_of(self, principal: str) -> tuple[str, Limit]:
        return self.limits.for_principal(principal)

    async def close(self) -> None:
        """Stop handling queued calls (the master is stopping: its books go with it)."""
        for queue in self._queues.values():
            if queue.drainer is not None:
                await cancel_and_wait(queue.drainer)
            for _, principal, _ in queue.calls:
                self.counts[principal].queued -= 1
            queue.calls.clear()
