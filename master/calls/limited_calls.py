"""Calls from framework and operator principals under their rate limits (Mesos's
framework rate limiting): handled now, queued behind the principal's earlier calls, or,
past the queue's capacity, refused so that the books are left as if the framework had
declined: its offers go back to the pool, the tasks it asked for are reported
`TASK_LOST` (`REASON_RATE_LIMITED`: launch them again) and it hears which call it was
(of a flood's refusals, a few errors a second, each counting every call refused since the
last: `RateLimitedTold`).

Before any of that, every arriving payload waits its principal's turn in the fair intake
(master.calls.fair_intake), undecoded; a limited principal's payloads there count against the
same capacity, and past it are refused unread.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from master.authz import Caller, RoleACL
from master.books import Books
from master.calls.framework_calls import FrameworkCalls
from master.calls.throttle import READ_WHEN_FULL, Throttle, Verdict, call_cost, reconcile_cost
from master.counters import MessageCounts
from master.outbox import MAX_ERROR_TEXT, Outbox
from master.refusal_sampling import RateLimitedTold
from protocol import logs
from protocol.transport.aio import loop_time
from protocol.wire.codec import batch_reply_to, peek_types
from protocol.wire.messages import (
    Accept,
    Error,
    Reconcile,
    Subscribe,
    Wire,
)
from protocol.wire.topics import Sender

Route = Callable[[Any, Caller], Awaitable[None]]
"""A call's handler (the intake's routes: `master.calls.intake`)."""

# The share of the master's time each kind of principal is served at when all are
# waiting: the slaves carry every framework's task updates (and are never rate limited),
# so a framework or operator flooding gets a small share, never the slaves' or the others'.


class LimitedCalls:
    """Every call's way in: now, queued behind the principal's earlier calls, or refused
    past capacity (constructed with the framework calls a refused Accept declines through)."""

    def __init__(
        self,
        books: Books,
        throttle: Throttle,
        outbox: Outbox,
        messages: MessageCounts,
        acl: RoleACL,
        framework_calls: FrameworkCalls,
    ) -> None:
        self.books, self.throttle, self.outbox = books, throttle, outbox
        self.messages, self.acl = messages, acl
        self.framework_calls = framework_calls
        self.told = RateLimitedTold()  # what a principal hears of its refused calls

    async def call(self, route: Route, message: Wire, caller: Caller, limited: bool) -> None:
        """Handle one call now, or leave it to the throttle, or refuse it past capacity."""
        cost = call_cost(message) if limited else None
        if isinstance(message, Reconcile) and not message.tasks and cost is not None:
            fw = self.books.frameworks.get(message.framework_id)  # implicit: all its tasks
            cost = reconcile_cost(len(fw.tasks)) if fw is not None else cost
        if cost is not None:

            async def handle() -> None:
                await self._handle(route, message, caller)

            verdict = self.throttle.submit(caller.principal, cost, handle)
            if verdict is Verdict.QUEUED:
                return
            if verdict is Verdict.REFUSED:
                await self._over_capacity(message, caller)
                return
        await self._handle(route, message, caller)

    async def _handle(self, route: Route, message: Wire, caller: Caller) -> None:
        if self._removed(message, caller):
            return
        try:
            await route(message, caller)
        except Exception:  # (CancelledError is not one: it goes through)
            self.outbox.log.exception(
                "master.handler_failed",
                type=message.TYPE,
                kind=caller.kind,
                principal=caller.principal,
            )

    def _removed(self, message: Wire, caller: Caller) -> bool:
        """A call of a principal no longer in the cluster's principals (`drfmesos auth
        remove`; its connection may outlive the removal, its calls queue behind it) is
        refused: taken from nobody the store does not name. (A Subscribe is refused
        where it is answered: FrameworkCalls.)"""
        why = self.acl.unknown(caller.principal)
        if why is None or caller.kind == "slave" or isinstance(message, Subscribe):
            return False
        self.outbox.refuse(caller, why, "unknown-principal", message.TYPE)
        return True

    def refused_unread(self, sender: Sender, payload: bytes) -> bool:
        """Refuse a payload unread, its principal's queue full, unless it holds something
        that must be read whatever happens (see READ_WHEN_FULL)."""
        names = peek_types(payload)
        if not names or not READ_WHEN_FULL.isdisjoint(names):
            return False
        caller = Caller.of(sender, None)
        self.throttle.refused_unread(sender.principal, len(names))
        calls = Counter(names)  # (a flood's payload: a few kinds, hundreds of calls)
        self.messages.received.update(calls)
        for name, n in calls.items():
            n -= name == names[0]  # (counted below)
            if n:
                self.messages.outcomes[(name, "refused", "rate-limited")] += n
        self.outbox.count_refused("rate-limited", len(names) - 1)  # (and one more below)
        why = self._over_capacity_why(f"{names[0]} refused", caller)
        self.outbox.refuse(caller, why, "rate-limited", names[0], tell=False)
        told = self.told.tell(sender.principal, calls, loop_time())
        if told is not None:  # (where to, read only when told)
            reply_to = batch_reply_to(payload)
            if self.outbox.topics.owns_reply_topic(sender, reply_to):
                self._tell(Caller.of(sender, reply_to), told)
        return True

    def _over_capacity_why(self, what: str, caller: Caller, them: bool = False) -> str:
        _, limit = self.throttle.limit_of(caller.principal)
        return (
            f"rate limit: {what}, {caller.principal}'s queue is full ({limit.capacity} calls, "
            f"handled at {limit.qps:g} a second); send {'them' if them else 'it'} again later"
        )

    def _tell(self, caller: Caller, told: Counter[str]) -> None:
        """An error to `caller` naming the calls refused for its limit that it has not
        heard of (see RateLimitedTold)."""
        assert caller.reply_to is not None
        ((first, _),) = told.most_common(1)
        if told.total() == 1:
            why = self._over_capacity_why(f"{first} refused", caller)
        else:
            which = ", ".join(f"{name} {n:,}" for name, n in told.most_common())
            what = f"{told.total():,} calls refused since the last error ({which})"
            why = self._over_capacity_why(what, caller, them=True)
        self.outbox.send_topic(
            caller.reply_to,
            Error(message=logs.clip(why, MAX_ERROR_TEXT), code="rate-limited", about=first),
        )

    async def _over_capacity(self, message: Wire, caller: Caller) -> None:
        why = self._over_capacity_why(f"{message.TYPE} refused", caller)
        ids: dict[str, Any] = {}
        if isinstance(message, Accept):
            ids["framework_id"] = message.framework_id
            await self.framework_calls.refused_accept(message, caller, why)
        self.outbox.refuse(caller, why, "rate-limited", message.TYPE, tell=False, **ids)
        told = self.told.tell(caller.principal, Counter((message.TYPE,)), loop_time())
        if told is not None and caller.reply_to:
            self._tell(caller, told)
