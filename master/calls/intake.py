"""The master's one intake: every call's way in, by the bus or by another door (the Mesos
HTTP API, `master.mesos_api`), up to its handler.

A payload that arrives on the master's inbound topics is read for who sent it once (the
topic's principal: the broker lets each publish only under its own name). A framework
or operator principal whose calls waiting would pass its rate limit's capacity has the
payload refused unread; anything else waits, undecoded, in its principal's queue in the
fair queue (`master.calls.fair_intake`), so that a flooding tenant's backlog is not in
front of everyone else's calls; a Last Will waits in the same queue, behind the calls its
party sent before it went. In the payload's turn it goes through the transport's one
dispatch (`protocol.transport.inbound.payload_taker`): its size is bounded (MAX_CALL_BYTES
a message, MAX_CALL_ITEMS calls and list items), a big one decoded off the loop, answers
go only to the sender's own outbox, and each call is looked up once in the routes of its
sender's kind and handed on under the rate limits (`master.calls.limited_calls`). A call
from another door takes the same route lookup and limits (`call`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from master.authz import Caller
from master.calls.fair_intake import FairIntake
from master.calls.limited_calls import LimitedCalls, Route
from master.calls.throttle import Throttle
from master.counters import MessageCounts
from master.outbox import Outbox
from protocol.transport.base import Transport
from protocol.transport.inbound import payload_taker
from protocol.wire.codec import (
    MAX_MESSAGE_BYTES,
    MAX_PAYLOAD_ITEMS,
    DecodeError,
    Envelope,
    count_messages,
    decode_many,
)
from protocol.wire.messages import Subscribe, Wire
from protocol.wire.topics import Sender, Topics, check_segment, too_long

MAX_CALL_BYTES = 1024 * 1024  # one message of a framework or operator, at most (docs: bounds)
MAX_CALL_ITEMS = MAX_PAYLOAD_ITEMS  # calls and list items in one payload of theirs (docs: bounds)
DECODE_INLINE_BYTES = 64 * 1024  # payloads above this are decoded off the loop
YIELD_EVERY = 64  # calls of one payload handled between turns of the loop
INTAKE_WEIGHTS = {"slave": 8.0, "master": 8.0}  # a principal's share of the intake; others 1

Routes = dict[str, dict[type[Wire], Route]]


def rate_limited(kind: str) -> bool:
    """Whether a kind of principal's calls are rate limited: as Mesos, framework (and
    operator) principals' are; slaves' are never."""
    return kind != "slave"


class CallIntake:
    """The master's `protocol.transport.base.Intake` for its inbound topics, constructed
    with the rate-limited way in, and the routes of each kind of principal."""

    yield_every = YIELD_EVERY

    def __init__(
        self,
        bus: Transport,
        topics: Topics,
        throttle: Throttle,
        outbox: Outbox,
        messages: MessageCounts,
        limited: LimitedCalls,
        routes: Routes,
        gone: Callable[[str, bytes], Awaitable[None]],
    ) -> None:
        """`gone`: what takes a Last Will in its turn."""
        self.topics, self.throttle, self.outbox, self.messages = topics, throttle, outbox, messages
        self.limited, self.routes, self._gone = limited, routes, gone
        self.fair = FairIntake(self._serve)  # each principal's payloads in its turn
        self._take = payload_taker(bus, self)
        self._gone_prefix = topics.gone_all.removesuffix("+/+")
        # the payload in its turn's sender (read from its topic as it arrived), and its
        # items' reply_to (a list's items share one: its ownership is checked once)
        self._sender: Sender | None = None
        self._asked: tuple[str, str | None, Caller, str | None] | None = None

    async def arrive(self, topic: str, payload: bytes) -> None:
        """A payload arrives: into its principal's queue in the fair intake, or refused
        unread if the principal is limited and its queue there is full."""
        sender = self.topics.sender(topic)
        calls = count_messages(payload)
        if sender is None:
            self.fair.put("?", 1.0, topic, payload, calls)  # (admit counts it dropped)
            return
        key = f"{sender.kind}/{sender.principal}"
        if (
            rate_limited(sender.kind)
            and self._queue_full(key, sender.principal, calls)
            and self.limited.refused_unread(sender, payload)
        ):
            return
        self.fair.put(key, INTAKE_WEIGHTS.get(sender.kind, 1.0), topic, payload, calls, sender)

    def arrive_gone(self, kind: str, principal: str, topic: str, payload: bytes) -> None:
        """A party's Last Will (published by the broker under its name): in its queue,
        behind the calls it sent before it went (MQTT orders nothing across topics)."""
        self.fair.put(f"{kind}/{principal}", INTAKE_WEIGHTS.get(kind, 1.0), topic, payload, 1)

    def _queue_full(self, key: str, principal: str, calls: int) -> bool:
        """Whether `calls` more would take what the principal has waiting past its
        capacity: its calls here and in the throttle's queue together, as Mesos counts a
        principal's messages waiting (a payload alone is always taken: the throttle decides
        on its calls). Refused here, a flood's payload costs the master no turn in the
        intake."""
        _, limit = self.throttle.limit_of(principal)
        if limit.qps is None or limit.capacity is None:
            return False
        waiting = self.fair.waiting(key)
        if waiting and waiting + calls > limit.capacity:
            return True
        return self.throttle.full(principal, waiting + calls)

    async def _serve(self, topic: str, payload: bytes, sender: Sender | None) -> None:
        """A payload's turn: a Last Will, or calls through the transport's one dispatch."""
        if topic.startswith(self._gone_prefix):
            await self._gone(topic, payload)
        else:
            self._sender, self._asked = sender, None
            await self._take(topic, payload)

    async def admit(self, topic: str, payload: bytes) -> list[Envelope | DecodeError] | None:
        """A call: who sent it is the topic's principal; the payload is not trusted."""
        sender = self._sender
        if sender is None:
            self.messages.outcomes[("?", "dropped", "")] += 1
            return None
        limited = rate_limited(sender.kind)
        if (
            limited
            and self.throttle.full(sender.principal, count_messages(payload))
            and self.limited.refused_unread(sender, payload)
        ):
            return None
        return await self._decode(payload, limited)

    async def deliver(self, topic: str, item: Envelope | DecodeError) -> None:
        sender = self._sender
        assert sender is not None  # (admitted)
        caller, problem = self._caller(topic, sender, item.reply_to)
        kind = (item.type_name or "?") if isinstance(item, DecodeError) else item.message.TYPE
        self.messages.received[kind] += 1
        if problem is not None:  # told where it may always read: its outbox itself
            self.outbox.refuse(caller, problem, "invalid-reply-to", kind)
            return
        if isinstance(item, DecodeError):
            why = f"{item.reason}: {item.detail}"
            self.outbox.refuse(caller, why, item.reason, item.type_name or "")
            return
        route = self._route(item.message, caller)
        if route is None:
            return
        if isinstance(item.message, Subscribe):
            caller = answered_at_inbox(caller, item.message, self.topics)
        await self.limited.call(route, item.message, caller, rate_limited(sender.kind))

    async def call(self, message: Wire, caller: Caller) -> None:
        """A call that came another way than the bus (the Mesos HTTP API, master.mesos_api),
        from a caller that transport authenticated: the bus's routes, counts and limits."""
        self.messages.received[message.TYPE] += 1
        route = self._route(message, caller)
        if route is not None:
            await self.limited.call(route, message, caller, rate_limited(caller.kind))

    def _route(self, message: Wire, caller: Caller) -> Route | None:
        """The handler its caller's kind may call, counted; None (refused) if none."""
        kind = message.TYPE
        route = self.routes[caller.kind].get(type(message))
        if route is None:
            self.outbox.refuse(caller, f"a {caller.kind} may not send {kind}", "forbidden", kind)
            return None
        return self.messages.counted(route, kind)

    def _caller(
        self, topic: str, sender: Sender, reply_to: str | None
    ) -> tuple[Caller, str | None]:
        """Who sent a call, and where its answers go: only to the sender's own outbox, at
        a topic of at most MAX_REPLY_TOPIC characters (with why not, if its topic is one
        of its own and longer: the call is refused, answered at its outbox)."""
        if self._asked is not None and self._asked[:2] == (topic, reply_to):
            return self._asked[2:]
        topics = self.topics
        problem = None
        if reply_to is None or not topics.in_outbox(sender, reply_to):
            caller = Caller.of(sender, None)  # answers go only to the sender's own outbox
        elif problem := too_long(reply_to):
            caller = Caller.of(sender, topics.outbox(sender.kind, sender.principal))
        else:
            caller = Caller.of(sender, reply_to)
        self._asked = (topic, reply_to, caller, problem)
        return caller, problem

    async def _decode(self, payload: bytes, limited: bool) -> list[Envelope | DecodeError]:
        """A payload's calls. One of a framework or operator holds at most MAX_CALL_BYTES
        a message and MAX_CALL_ITEMS calls and list items in all. A big payload is decoded
        in a thread, each message a short step there, so the loop goes on meanwhile."""
        limit, items = (MAX_CALL_BYTES, MAX_CALL_ITEMS) if limited else (MAX_MESSAGE_BYTES, None)
        if len(payload) <= DECODE_INLINE_BYTES:
            return decode_many(payload, limit, items)
        return await asyncio.to_thread(decode_many, payload, limit, items)


def answered_at_inbox(caller: Caller, msg: Subscribe, topics: Topics) -> Caller:
    """Where a Subscribe is answered if its call named nowhere: the inbox it names, which
    the broker lets only its principal read."""
    if caller.reply_to:
        return caller
    try:
        inbox = topics.framework(caller.principal, check_segment(msg.inbox))
    except ValueError:
        return caller
    return Caller(caller.kind, caller.principal, inbox)
