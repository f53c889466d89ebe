"""The master's one intake: every call's way in, by the bus or by another door (the Mesos
HTTP API, `master.mesos_api`), up to its handler.

A payload that arrives on the master's inbound topics is read for who sent it once (the
topic's principal: the broker lets each publish only under its own name); a call from
another door comes with the caller its transport authenticated. Then one admission
check (`PrincipalQueues.over_capacity`): a framework or operator principal whose calls
waiting would pass its rate limit's capacity has what arrives refused
(`master.intake.refusals`: a payload unread); anything else waits in its principal's one
queue (`master.intake.queues`), a payload undecoded, so that a flooding tenant's backlog
is not in front of everyone else's calls (with nothing waiting there or behind it on the
bus, and nothing being handled, it is handled at once: `PrincipalQueues.serve_now`); a
Last Will waits in the same queue, behind the calls its party sent before it went. In a
payload's turn it goes through the transport's one dispatch
(`protocol.transport.inbound.payload_taker`): its size is bounded (MAX_CALL_BYTES a
message, MAX_CALL_ITEMS calls and list items), a big one decoded off the loop, answers
go only to the sender's own outbox, and each call is looked up once in the routes of its
sender's kind, charged to its principal's rate limit (handled now, or held in its queue
until the limit allows) and handed to its handler.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from master.authz import Caller, RoleACL
from master.books import Books
from master.counters import MessageCounts
from master.intake.costs import READ_WHEN_FULL, call_cost, reconcile_cost
from master.intake.queues import PrincipalQueues, Work
from master.intake.refusals import RateLimitRefusals
from master.outbox import Outbox
from protocol import logs
from protocol.transport.base import Transport
from protocol.transport.inbound import payload_taker
from protocol.wire.codec import (
    MAX_MESSAGE_BYTES,
    MAX_PAYLOAD_ITEMS,
    DecodeError,
    Envelope,
    count_messages,
    decode,
    decode_many,
)
from protocol.wire.messages import Gone, Reconcile, Subscribe, Wire
from protocol.wire.topics import Sender, Topics, check_segment, too_long

log = logs.get("intake")

MAX_CALL_BYTES = 1024 * 1024  # one message of a framework or operator, at most (docs: bounds)
MAX_CALL_ITEMS = MAX_PAYLOAD_ITEMS  # calls and list items in one payload of theirs (docs: bounds)
DECODE_INLINE_BYTES = 64 * 1024  # payloads above this are decoded off the loop
# A Last Will is one Gone the party's own Bus made (some 60 bytes); a principal may also
# publish on its will topic itself (the broker lets it: the will is sent in its name). So
# past this size a payload there is no will and is dropped unread; and one party's will
# of one incarnation waits once (the same again is dropped), with at most WILLS_WAITING
# of one principal's parties' waiting -- its frameworks and slaves all lost at once, a
# host's, are each told -- so that what it sends there costs the master no more than a
# call, and only its own wills can be lost to its own flood.
MAX_WILL_BYTES = 1024
WILLS_WAITING = 4096
YIELD_EVERY = 64  # calls of one payload handled between turns of the loop
# The share of the master's time each kind of principal is served at when all are
# waiting: the slaves carry every framework's task updates (and are never rate limited),
# so a framework or operator flooding gets a small share, never the slaves' or the others'.
INTAKE_WEIGHTS = {"slave": 8.0, "master": 8.0}  # others 1

Route = Callable[[Any, Caller], Awaitable[None]]
"""A call's handler."""
Routes = dict[str, dict[type[Wire], Route]]


def queue_key(kind: str, principal: str) -> str:
    """A principal's queue: one per kind and name (a framework and an operator of one
    name queue apart, and are held to one limit)."""
    return f"{kind}/{principal}"


def rate_limited(kind: str) -> bool:
    """Whether a kind of principal's calls are rate limited: as Mesos, framework (and
    operator) principals' are; slaves' are never."""
    return kind != "slave"


class CallIntake:
    """The master's `protocol.transport.base.Intake` for its inbound topics, and the way
    in of its other doors (`call`)."""

    yield_every = YIELD_EVERY

    def __init__(
        self,
        bus: Transport,
        topics: Topics,
        queues: PrincipalQueues,
        refusals: RateLimitRefusals,
        outbox: Outbox,
        messages: MessageCounts,
        books: Books,
        acl: RoleACL,
        routes: Routes,
        gone: Callable[[Gone, Caller], Awaitable[None]],
    ) -> None:
        """`gone`: what takes a Last Will in its turn."""
        self.topics, self.queues, self.refusals = topics, queues, refusals
        self.outbox, self.messages, self.books, self.acl = outbox, messages, books, acl
        self.routes, self._gone = routes, gone
        self._bus = bus
        self._take = payload_taker(bus, self)
        # the payload in its turn: its sender (read from its topic as it arrived), whether
        # it was admitted past its capacity, and its items' reply_to (a list's items share
        # one: its ownership is checked once)
        self._sender: Sender | None = None
        self._over = False
        self._asked: tuple[str, str | None, Caller, str | None] | None = None
        # queue key: the Last Wills waiting there, as (party id, incarnation)
        self._wills_waiting: dict[str, set[tuple[str, str]]] = {}

    # -- arrival: who sent it, once; admitted, once ---------------------------------------

    async def arrive(self, topic: str, payload: bytes) -> None:
        """A payload arrives: into its principal's queue, or refused unread if the
        principal is limited and past its capacity."""
        sender = self.topics.sender(topic)
        if sender is None:
            self.messages.outcomes[("?", "dropped", "")] += 1
            return
        calls = count_messages(payload)
        limited = rate_limited(sender.kind)
        over = limited and self.queues.over_capacity(sender.principal, calls, len(payload))
        if over and self.refusals.refused_unread(sender, payload):
            return

        async def serve() -> None:
            self._sender, self._over, self._asked = sender, over, None
            await self._take(topic, payload)

        # nothing waits (here, nor behind it on the bus) and nothing is being handled: it
        # is handled now, as the queues' server would take it next (a lone task's calls
        # and updates: the hand-over to the server's task was a turn of a cold loop)
        key = queue_key(sender.kind, sender.principal)
        weight = INTAKE_WEIGHTS.get(sender.kind, 1.0)
        if not self._bus.backlog() and await self.queues.serve_now(key, weight, serve):
            return
        self._put(sender.kind, sender.principal, calls, serve, nbytes=len(payload))

    def arrive_gone(self, kind: str, principal: str, payload: bytes) -> None:
        """A party's Last Will (published by the broker under its name): in its queue,
        behind the calls it sent before it went (MQTT orders nothing across topics).
        One too big to be a will, not a Gone, the same as one waiting, or past
        WILLS_WAITING of the principal's, is dropped."""
        key = queue_key(kind, principal)
        waiting = self._wills_waiting.setdefault(key, set())
        gone = _gone_of(payload)
        will = None if gone is None else (gone.id, gone.incarnation)
        if will is None or will in waiting or len(waiting) >= WILLS_WAITING:
            if not waiting:
                del self._wills_waiting[key]
            self.messages.outcomes[("Gone", "dropped", "")] += 1
            sampled = self.outbox.sampled(principal, "will-dropped")
            if sampled is not None:
                log.warning(
                    "will.dropped", kind=kind, principal=principal, bytes=len(payload), **sampled
                )
            return
        assert gone is not None
        waiting.add(will)

        async def serve() -> None:
            waiting.discard(will)
            if not waiting and self._wills_waiting.get(key) is waiting:
                del self._wills_waiting[key]
            await self._gone(gone, Caller(kind, principal, None))

        self._put(kind, principal, 1, serve, limited=False)  # (not a call: not counted)

    async def call(self, message: Wire, caller: Caller) -> None:
        """A call that came another way than the bus (the Mesos HTTP API, master.mesos_api),
        from a caller that transport authenticated: the bus's routes, admission, queue and
        limits. Returns once it was handled, held for its limit, or refused."""
        self.messages.received[message.TYPE] += 1
        route = self._route(message, caller)
        if route is None:
            return
        limited = rate_limited(caller.kind)
        # (what it will be held as, parsed, if its bucket cannot pay: its cost)
        over = limited and self.queues.over_capacity(caller.principal, call_cost(message) or 1)
        if over and message.TYPE not in READ_WHEN_FULL:
            await self.refusals.over_capacity(message, caller)
            return
        served = asyncio.get_running_loop().create_future()

        async def serve() -> None:
            try:
                await self._charge(route, message, caller, over)
            finally:
                if not served.done():
                    served.set_result(None)

        self._put(caller.kind, caller.principal, 1, serve)
        await served

    def later(self, kind: str, principal: str, work: Work) -> None:
        """The master's own work for a principal (answers it asked for before), in its
        queue behind its calls, served in its turn beside everybody else's; not a call:
        not counted against its rate limit (the asks were)."""
        self._put(kind, principal, 1, work, limited=False)

    def _put(
        self,
        kind: str,
        principal: str,
        calls: int,
        serve: Work,
        limited: bool = True,
        nbytes: int = 0,
    ) -> None:
        """Into the principal's queue, served at its kind's weight; its calls (and
        `nbytes`, its payload's) counted against its rate limit if its kind's are limited."""
        held = principal if limited and rate_limited(kind) else None
        self.queues.put(
            queue_key(kind, principal), INTAKE_WEIGHTS.get(kind, 1.0), held, calls, serve, nbytes
        )

    # -- a payload's turn: the transport's dispatch -------------------------------------

    async def admit(self, topic: str, payload: bytes) -> list[Envelope | DecodeError] | None:
        """A payload's calls (its sender and admission decided as it arrived)."""
        sender = self._sender
        assert sender is not None  # (arrive)
        return await self._decode(payload, rate_limited(sender.kind))

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
        await self._charge(route, item.message, caller, self._over)

    # -- a call read: charged, then handled ---------------------------------------------

    async def _charge(self, route: Route, message: Wire, caller: Caller, over: bool) -> None:
        """Handle a call now, or hold it for its limit, or (read past its principal's
        capacity) refuse it; a free call is handled whatever its limit."""
        cost = call_cost(message) if rate_limited(caller.kind) else None
        if cost is None:
            await self._handle(route, message, caller)
            return
        if over:
            await self.refusals.over_capacity(message, caller)
            return
        if isinstance(message, Reconcile) and not message.tasks:
            fw = self.books.frameworks.get(message.framework_id)  # implicit: all its tasks
            cost = reconcile_cost(len(fw.tasks)) if fw is not None else cost

        async def handle() -> None:
            await self._handle(route, message, caller)

        await self.queues.charge(
            queue_key(caller.kind, caller.principal), caller.principal, cost, handle
        )

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
        where it is answered: master.calls.subscribe.)"""
        why = self.acl.unknown(caller.principal)
        if why is None or caller.kind == "slave" or isinstance(message, Subscribe):
            return False
        self.outbox.refuse(caller, why, "unknown-principal", message.TYPE)
        return True

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


def _gone_of(payload: bytes) -> Gone | None:
    """The Gone a will's payload is (None: too big to be one, or not one)."""
    if len(payload) > MAX_WILL_BYTES:
        return None
    try:
        message = decode(payload).message
    except DecodeError:
        return None
    return message if isinstance(message, Gone) else None
