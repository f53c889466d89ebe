"""What every transport does with a payload that arrived for a subscriber: decode it (the
codec validates each message), answer bad input with an `Error`, pass each envelope
through the party's filters (epoch fencing, `protocol.transport.fencing`), and hand it to
the handler, counted; plus `Dispatcher`, which routes messages to handlers by type."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

from protocol import logs
from protocol.transport.base import Handler, Intake, Transport
from protocol.transport.message_counts import MessageCounts
from protocol.wire.codec import DecodeError, Envelope
from protocol.wire.messages import Wire

W = TypeVar("W", bound=Wire)

EnvelopeFilter = Callable[[str, Envelope], bool]
"""Called with the topic and each decoded envelope before its handler; False drops it."""

ReplyError = Callable[..., None]


class Receiver:
    """The decoded half of a transport's arrivals, shared by the MQTT bus and the
    in-memory transport so both treat what arrives the same way."""

    def __init__(
        self,
        log: Any,
        stats: dict[str, int],
        messages: MessageCounts,
        reply_error: ReplyError,
        filters: Sequence[EnvelopeFilter],
    ) -> None:
        self.log = log
        self.stats = stats
        self.messages = messages
        self.reply_error = reply_error
        self.filters = list(filters)

    async def raw(
        self, handler: Callable[[str, bytes], Awaitable[None]], topic: str, data: bytes
    ) -> None:
        try:
            await handler(topic, data)
        except asyncio.CancelledError:
            raise
        except Exception:
            self.log.exception("bus.handler_failed", topic=topic)

    async def handle_all(
        self, topic: str, handler: Handler, items: list[Envelope | DecodeError]
    ) -> None:
        for item in items:
            self.stats["received"] += 1
            kind = (item.type_name or "?") if isinstance(item, DecodeError) else item.message.TYPE
            self.messages.received[kind] += 1
            if isinstance(item, DecodeError):
                self.messages.outcomes[(kind, "refused", item.reason)] += 1
                self.log.warning(
                    "bus.bad_message",
                    topic=topic,
                    reason=item.reason,
                    detail=logs.clip(item.detail),
                    sender=logs.clip(item.reply_to or "", 200),
                )
                self.reply_error(
                    item.reply_to,
                    f"{item.reason}: {item.detail}",
                    code=item.reason,
                    about=item.type_name,
                )
                continue
            if not all(admits(topic, item) for admits in self.filters):
                continue
            try:
                await self.messages.counted(handler, kind)(item.message, item.reply_to)
            except asyncio.CancelledError:
                raise
            except Exception:
                # A handler bug must not take the party down: log it with what arrived.
                self.log.exception("bus.handler_failed", topic=topic, type=item.message.TYPE)


class Dispatcher:
    """Routes messages to handlers by type; anything else is refused with an Error."""

    def __init__(self, bus: Transport, party: str) -> None:
        self._bus = bus
        self._party = party
        self._routes: dict[type[Wire], Handler] = {}

    def on(
        self, message_type: type[W], handler: Callable[[W, str | None], Awaitable[None]]
    ) -> None:
        self._routes[message_type] = cast(Handler, handler)

    async def __call__(self, message: Wire, reply_to: str | None) -> None:
        handler = self._routes.get(type(message))
        if handler is None:
            self._bus.messages.refused(message.TYPE, "unexpected-type")
            self._bus.log.warning("bus.unexpected_type", type=message.TYPE, sender=reply_to)
            self._bus.reply_error(
                reply_to,
                f"the {self._party} does not take {message.TYPE} messages",
                code="unexpected-type",
                about=message.TYPE,
            )
            return
        await handler(message, reply_to)


async def subscribe_intake(transport: Transport, topic: str, intake: Intake, qos: int = 1) -> None:
    """What arrives on `topic` goes through `intake`, in the transport's dispatch (see
    `payload_taker`)."""
    await transport.subscribe_raw(topic, payload_taker(transport, intake), qos)


def payload_taker(transport: Transport, intake: Intake) -> Callable[[str, bytes], Awaitable[None]]:
    """The one way a payload goes through `intake`: admitted (or refused whole) by it, then
    each message delivered to it, the loop let breathe every `intake.yield_every`; a
    failure is logged with what arrived and the rest goes on. A subscriber that first
    queues what arrives (the master's fair intake) calls it in the payload's turn."""

    async def take(topic: str, data: bytes) -> None:
        try:
            items = await intake.admit(topic, data)
        except asyncio.CancelledError:
            raise
        except Exception:
            transport.log.exception("bus.handler_failed", topic=topic)
            return
        if items is None:
            return
        transport.stats["received"] += len(items)
        every = intake.yield_every
        for i, item in enumerate(items):
            if every and i and not i % every:  # a big batch lets the loop breathe
                await asyncio.sleep(0)
            try:
                await intake.deliver(topic, item)
            except asyncio.CancelledError:
                raise
            except Exception:
                kind = item.type_name if isinstance(item, DecodeError) else item.message.TYPE
                transport.log.exception("bus.handler_failed", topic=topic, type=kind)

    return take
