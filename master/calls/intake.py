"""The master's intake: what it checks of a payload on its inbound topics before and as the
transport's dispatch (`protocol.transport.inbound.subscribe_intake`) hands each call on.

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
from master.shell import MasterShell
from protocol.wire.codec import MAX_MESSAGE_BYTES, DecodeError, Envelope, decode_many
from protocol.wire.messages import Wire
from protocol.wire.topics import Sender

MAX_CALL_BYTES = 1024 * 1024  # one message of a framework or operator, at most (README)
MAX_CALL_ITEMS = 4096  # calls and list items in one payload of theirs, at most (README)
DECODE_INLINE_BYTES = 64 * 1024  # payloads above this are decoded off the loop
YIELD_EVERY = 64  # calls of one payload handled between turns of the loop

Route = Callable[[Any, Caller], Awaitable[None]]
Routes = dict[str, dict[type[Wire], Route]]


class CallIntake:
    """The master's `protocol.transport.base.Intake` for its inbound topics, constructed
    with the shell, the rate-limited way in, and the routes of each kind of principal."""

    yield_every = YIELD_EVERY

    def __init__(self, shell: MasterShell, limited: LimitedCalls, routes: Routes) -> None:
        self.shell, self.limited, self.routes = shell, limited, routes
        # the last payload's sender, and its items' reply_to (a list's items share one:
        # its ownership is checked once)
        self._sender: tuple[str, Sender] | None = None
        self._asked: tuple[str, str | None, Caller] | None = None

    async def admit(self, topic: str, payload: bytes) -> list[Envelope | DecodeError] | None:
        """A call: who sent it is the topic's principal; the payload is not trusted."""
        shell = self.shell
        sender = shell.topics.sender(topic)
        if sender is None:
            shell.messages.outcomes[("?", "dropped", "")] += 1
            return None
        limited = sender.kind != "slave"  # as Mesos: rate limits are for framework principals
        if (
            limited
            and shell.throttle.full(sender.principal)
            and self.limited.refused_unread(sender, payload)
        ):
            return None
        self._sender, self._asked = (topic, sender), None
        return await self._decode(payload, limited)

    async def deliver(self, topic: str, item: Envelope | DecodeError) -> None:
        shell = self.shell
        known = self._sender
        sender = known[1] if known is not None and known[0] == topic else None
        sender = sender or shell.topics.sender(topic)
        assert sender is not None  # (admitted)
        caller = self._caller(topic, sender, item.reply_to)
        kind = (item.type_name or "?") if isinstance(item, DecodeError) else item.message.TYPE
        shell.messages.received[kind] += 1
        if isinstance(item, DecodeError):
            shell.refuse(caller, f"{item.reason}: {item.detail}", item.reason, item.type_name or "")
            return
        route = self.routes[sender.kind].get(type(item.message))
        if route is None:
            why = f"a {sender.kind} may not send {item.message.TYPE}"
            shell.refuse(caller, why, "forbidden", item.message.TYPE)
            return
        limited = sender.kind != "slave"
        await self.limited.call(shell.messages.counted(route, kind), item.message, caller, limited)

    def _caller(self, topic: str, sender: Sender, reply_to: str | None) -> Caller:
        if self._asked is not None and self._asked[:2] == (topic, reply_to):
            return self._asked[2]
        if not self.shell.topics.owns_reply_topic(sender, reply_to):
            caller = Caller.of(sender, None)  # answers go only to the sender's own outbox
        else:
            caller = Caller.of(sender, reply_to)
        self._asked = (topic, reply_to, caller)
        return caller

    async def _decode(self, payload: bytes, limited: bool) -> list[Envelope | DecodeError]:
        """A payload's calls. One of a framework or operator holds at most MAX_CALL_BYTES
        a message and MAX_CALL_ITEMS calls and list items in all. A big payload is decoded
        in a thread, each message a short step there, so the loop goes on meanwhile."""
        limit, items = (MAX_CALL_BYTES, MAX_CALL_ITEMS) if limited else (MAX_MESSAGE_BYTES, None)
        if len(payload) <= DECODE_INLINE_BYTES:
            return decode_many(payload, limit, items)
        return await asyncio.to_thread(decode_many, payload, limit, items)
