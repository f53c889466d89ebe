"""The master's intake: what it checks of a payload on its inbound topics before and as the
transport's dispatch (`protocol.transport.inbound.payload_taker`) hands each call on.

What arrives first waits undecoded in its principal's queue in the fair intake
(`master.fair_intake`), so that a flooding tenant's backlog is not in front of everyone
else's calls; a Last Will waits in the same queue, behind the calls its party sent before
it went. In the payload's turn:

Who sent it is the topic's principal (the broker lets each publish only under its own
name); a framework or operator principal whose queue is full has its payload refused
unread; its payloads are bounded (MAX_CALL_BYTES a message, MAX_CALL_ITEMS calls and list
items); a big payload is decoded off the loop; answers go only to the sender's own
outbox; and each call goes to the route its sender's kind may call, through the rate
limits (`master.calls.limited_calls`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from master.authz import Caller
from master.calls.limited_calls import LimitedCalls
from master.counters import MessageCounts
from master.fair_intake import FairIntake
from master.outbox import Outbox
from master.throttle import Throttle
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

Route = Callable[[Any, Caller], Awaitable[None]]
Routes = dict[str, dict[type[Wire], Route]]


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
        # the last payload's sender, and its items' reply_to (a list's items share one:
        # its ownership is checked once)
        self._sender: tuple[str, Sender] | None = None
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
            sender.kind != "slave"
            and self._queue_full(key, sender.principal, calls)
            and self.limited.refused_unread(sender, payload)
        ):
            return
        self.fair.put(key, INTAKE_WEIGHTS.get(sender.kind, 1.0), topic, payload, calls)

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

    async def _serve(self, topic: str, payload: bytes) -> None:
        """A payload's turn: a Last Will, or calls through the transport's one dispatch."""
        if topic.startswith(self._gone_prefix):
            await self._gone(topic, payload)
        else:
            await self._take(topic, payload)

    async def admit(self, topic: str, payload: bytes) -> list[Envelope | DecodeError] | None:
        """A call: who sent it is the topic's principal; the payload is not trusted."""
        sender = self.topics.sender(topic)
        if sender is None:
            self.messages.outcomes[("?", "dropped", "")] += 1
            return None
        limited = sender.kind != "slave"  # as Mesos: rate limits are for framework principals
        if (
            limited
            and self.throttle.full(sender.principal, count_messages(payload))
            and self.limited.refused_unread(sender, payload)
        ):
            return None
        self._sender, self._asked = (topic, sender), None
        return await self._decode(payload, limited)

    async def deliver(self, topic: str, item: Envelope | DecodeError) -> None:
        known = self._sender
        sender = known[1] if known is not None and known[0] == topic else None
        sender = sender or self.topics.sender(topic)
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
        route = self.routes[sender.kind].get(type(item.message))
        if route is None:
            why = f"a {sender.kind} may not send {item.message.TYPE}"
            self.outbox.refuse(caller, why, "forbidden", item.message.TYPE)
            return
        if isinstance(item.message, Subscribe):
            caller = answered_at_inbox(caller, item.message, self.topics)
        limited = sender.kind != "slave"
        await self.limited.call(self.messages.counted(route, kind), item.message, caller, limited)

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
