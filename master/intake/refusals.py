"""What a framework or operator principal past its rate limit's capacity is told, and
what is undone for it (Mesos's framework rate limiting): a refused payload is refused
unread; a call read past the capacity (an Accept: see `costs.READ_WHEN_FULL`) leaves the
books as if the framework had declined: its offers go back to the pool, the tasks it
asked for are reported `TASK_LOST` (`REASON_RATE_LIMITED`: launch them again). Of a
flood's refusals the principal hears a few errors a second, each counting every call
refused since the last (`RateLimitedTold`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from master.authz import Caller
from master.counters import MessageCounts
from master.intake.costs import read_when_full
from master.intake.queues import PrincipalQueues
from master.outbox import MAX_ERROR_TEXT, Outbox
from master.refusal_sampling import RateLimitedTold
from protocol import logs
from protocol.transport.aio import loop_time
from protocol.wire.codec import batch_reply_to, peek_types
from protocol.wire.messages import Accept, Error, Wire
from protocol.wire.topics import Sender

RefusedAccept = Callable[[Accept, Caller, str], Awaitable[None]]
"""What gives a refused Accept's offers back (`Accepts.refused_accept`)."""


class RateLimitRefusals:
    def __init__(
        self,
        queues: PrincipalQueues,
        outbox: Outbox,
        messages: MessageCounts,
        refused_accept: RefusedAccept,
    ) -> None:
        self.queues, self.outbox, self.messages = queues, outbox, messages
        self.refused_accept = refused_accept
        self.told = RateLimitedTold()  # what a principal hears of its refused calls

    def refused_unread(self, sender: Sender, payload: bytes) -> bool:
        """Refuse a payload unread, its principal past its capacity, unless it holds
        something that must be read whatever happens (see `costs.READ_WHEN_FULL`)."""
        names = peek_types(payload)
        if not names or read_when_full(names):
            return False
        caller = Caller.of(sender, None)
        self.queues.refused(sender.principal, len(names))
        calls = Counter(names)  # (a flood's payload: a few kinds, hundreds of calls)
        self.messages.received.update(calls)
        for name, n in calls.items():
            n -= name == names[0]  # (counted below)
            if n:
                self.messages.outcomes[(name, "refused", "rate-limited")] += n
        self.outbox.count_refused("rate-limited", len(names) - 1)  # (and one more below)
        why = self._why(f"{names[0]} refused", caller)
        self.outbox.refuse(caller, why, "rate-limited", names[0], tell=False)
        told = self.told.tell(sender.principal, calls, loop_time())
        if told is not None:  # (where to, read only when told)
            reply_to = batch_reply_to(payload)
            if self.outbox.topics.owns_reply_topic(sender, reply_to):
                self._tell(Caller.of(sender, reply_to), told)
        return True

    async def over_capacity(self, message: Wire, caller: Caller) -> None:
        """Refuse a call read past its principal's capacity (an Accept's offers back)."""
        self.queues.refused(caller.principal, 1)
        why = self._why(f"{message.TYPE} refused", caller)
        ids: dict[str, Any] = {}
        if isinstance(message, Accept):
            ids["framework_id"] = message.framework_id
            await self.refused_accept(message, caller, why)
        self.outbox.refuse(caller, why, "rate-limited", message.TYPE, tell=False, **ids)
        told = self.told.tell(caller.principal, Counter((message.TYPE,)), loop_time())
        if told is not None and caller.reply_to:
            self._tell(caller, told)

    def _why(self, what: str, caller: Caller, them: bool = False) -> str:
        _, limit = self.queues.limit_of(caller.principal)
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
            why = self._why(f"{first} refused", caller)
        else:
            which = ", ".join(f"{name} {n:,}" for name, n in told.most_common())
            what = f"{told.total():,} calls refused since the last error ({which})"
            why = self._why(what, caller, them=True)
        self.outbox.send_topic(
            caller.reply_to,
            Error(message=logs.clip(why, MAX_ERROR_TEXT), code="rate-limited", about=first),
        )
