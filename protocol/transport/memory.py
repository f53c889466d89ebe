"""An in-process broker and transport, for tests: `MemoryBroker` and `MemoryTransport`.

The same topics, the same envelopes (every payload is encoded and decoded by the codec,
so validation is exercised), the same identities: a transport is one principal's
connection, and the broker lets it publish and read only what the credentials store's ACL
lets that principal (`protocol.tooling.credentials.acl_rules`, as mosquitto and the
embedded broker apply it), so trust tests mean the same here. What it leaves out is the
network: no sockets, no reconnects, no batching of posts into fewer payloads. What arrives
with no handler for its topic yet is kept for the handler that comes, as the bus keeps
it (`protocol.transport.unheard`).

    broker = MemoryBroker(principals)           # or MemoryBroker() for no ACL at all
    bus = broker.connector("node1")(name="slave", inbox=..., will=...)
    await bus.start()
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterable, Sequence
from typing import Self

from protocol import logs
from protocol.tooling.credentials import Principal, acl_rules, filter_allows
from protocol.transport.aio import spawn_guarded
from protocol.transport.backlog import StampedQueue
from protocol.transport.base import (
    BusClosed,
    BusRefused,
    Handler,
    OnConnect,
    RawHandler,
    Transport,
    Will,
)
from protocol.transport.fencing import EpochFence
from protocol.transport.inbound import EnvelopeFilter, Receiver
from protocol.transport.message_counts import MessageCounts
from protocol.transport.unheard import Released, Unheard
from protocol.wire.codec import decode_many, encode
from protocol.wire.messages import Error, Gone, Wire
from protocol.wire.topics import announced

log = logs.get("memory-broker")


class MemoryBroker:
    """Topics in this process. `principals`: who may connect and what each may publish and
    read (None: anyone, anything, as a broker without `--auth`)."""

    def __init__(self, principals: Iterable[Principal] | None = None) -> None:
        self._rules: dict[str, list[tuple[str, str]]] | None = None
        if principals is not None:
            self._rules = {p.name: acl_rules(p) for p in principals}
        self._connected: dict[str, MemoryTransport] = {}  # by client id
        self._retained: dict[str, bytes] = {}
        self.denied = 0  # publishes the ACL dropped

    def connector(self, principal: str | None) -> MemoryConnector:
        return MemoryConnector(self, principal)

    def may(self, principal: str | None, access: str, topic: str) -> bool:
        if self._rules is None:
            return True
        rules = self._rules.get(principal or "")
        return rules is not None and any(
            a == access and filter_allows(pattern, topic) for a, pattern in rules
        )

    def _attach(self, transport: MemoryTransport) -> None:
        if self._rules is not None and transport.principal not in self._rules:
            raise BusClosed(f"the broker refused the credentials of {transport.principal!r}")
        old = self._connected.get(transport.client_id)
        self._connected[transport.client_id] = transport
        if old is not None and old is not transport:  # as MQTT: a client id is one session
            old.lose(will=False)

    def _detach(self, transport: MemoryTransport, *, will: bool) -> None:
        if self._connected.get(transport.client_id) is transport:
            del self._connected[transport.client_id]
        if will and transport.will is not None:
            topic, kind, party_id = transport.will
            gone = Gone(kind=kind, id=party_id, incarnation=transport.incarnation)
            self.publish(transport.principal, topic, encode(gone), retain=False)

    def publish(self, sender: str | None, topic: str, payload: bytes, *, retain: bool) -> None:
        """Deliver to every matching subscription its principal may read; a publish the
        sender may not make is dropped, as mosquitto drops it (the sender is not told)."""
        if not self.may(sender, "write", topic):
            self.denied += 1
            log.warning("memory_broker.denied", principal=sender, topic=topic)
            return
        if retain:
            self._retained[topic] = payload
        for transport in list(self._connected.values()):
            if transport.wants(topic) and self.may(transport.principal, "read", topic):
                transport.arrive(topic, payload)

    def retained(self, transport: MemoryTransport, pattern: str) -> None:
        """A new subscription gets the retained messages it matches."""
        for topic, payload in list(self._retained.items()):
            if not announced(topic):  # (as a Bus: read retained only where the master says)
                continue
            if filter_allows(pattern, topic) and self.may(transport.principal, "read", topic):
                transport.arrive(topic, payload)


class MemoryConnector:
    """Makes transports on `broker` as `principal` (see protocol.transport.base.Connector)."""

    def __init__(self, broker: MemoryBroker, principal: str | None) -> None:
        self.broker = broker
        self._principal = principal

    @property
    def principal(self) -> str | None:
        return self._principal

    def __call__(
        self, *, name: str, inbox: str | None = None, will: Will | None = None
    ) -> MemoryTransport:
        return MemoryTransport(self.broker, self._principal, name=name, inbox=inbox, will=will)


class MemoryTransport:
    """One principal's connection to a `MemoryBroker` (a `Transport`)."""

    def __init__(
        self,
        broker: MemoryBroker,
        principal: str | None,
        *,
        name: str,
        inbox: str | None = None,
        will: Will | None = None,
        filters: Sequence[EnvelopeFilter] | None = None,
    ) -> None:
        self.broker = broker
        self._principal = principal
        self.name = name
        # (each connection its own, a principal's as on a real broker: connection_id)
        own = f"{name}-{uuid.uuid4().hex[:12]}"
        self.client_id = f"{principal}~{own}" if principal else own
        self.inbox = inbox
        self.will = will
        self.epoch = 0
        self.incarnation = ""
        self.connections = 0
        self.log = logs.get("bus", party=name)
        self.stats = {"posted": 0, "published": 0, "received": 0, "payloads_in": 0, "fenced": 0}
        self.messages = MessageCounts()
        if filters is None:
            filters = [EpochFence(self.log, self.stats, self.messages)]
        self._receiver = Receiver(self.log, self.stats, self.messages, self.reply_error, filters)
        self._subs: dict[str, tuple[Handler | None, RawHandler | None]] = {}
        self._routes: dict[str, Handler] = {}  # topics a wildcard subscription brings
        self._on_connect: list[OnConnect] = []
        self._arrivals = StampedQueue()  # of (topic, payload), or Released
        self._unheard = Unheard(self.log, self.stats, self.messages)
        self._runner: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._connected = False
        self._closed = False
        self.refused: BusRefused | None = None  # (the memory broker never refuses later)
        self._gave_up = asyncio.Event()

    # -- lifecycle ---------------------------------------------------------------------------
    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def principal(self) -> str | None:
        return self._principal

    @property
    def gave_up(self) -> asyncio.Event:
        return self._gave_up

    @property
    def connected(self) -> bool:
        return self._connected

    async def start(
        self, *, wait: bool = True, timeout: float | None = 30.0, tries: int | None = None
    ) -> None:
        """Connect, then run the `on_connect` callbacks (as the bus does after each connect)."""
        self.broker._attach(self)
        self.incarnation = uuid.uuid4().hex[:16]
        self.connections += 1
        self._connected = True
        self._runner = asyncio.create_task(self._receive(), name=f"memory-{self.name}")
        for pattern in self._subs:
            self.broker.retained(self, pattern)
        for callback in self._on_connect:
            spawn_guarded(callback(), self._background, self.log)

    async def close(self, flush_timeout: float = 2.0, *, abandon: bool = False) -> None:
        """Disconnect cleanly (no Last Will). What was posted is already delivered."""
        if self._background and not abandon:  # on_connect callbacks still announcing us
            await asyncio.wait(set(self._background), timeout=flush_timeout)
        self._stop()
        self._unheard.close()  # (a lost connection's keeps its own: it may start again)
        self.broker._detach(self, will=False)
        await self._cancel_tasks()

    def lose(self, *, will: bool = True) -> None:
        """The connection drops without a goodbye: the broker announces the Last Will."""
        self._stop()
        self.broker._detach(self, will=will)
        for task in [*self._background, *([self._runner] if self._runner else [])]:
            task.cancel()

    def _stop(self) -> None:
        self._connected = False
        self._closed = True

    async def _cancel_tasks(self) -> None:
        tasks = [*self._background, *([self._runner] if self._runner else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, BusClosed):
                await task
        self._runner = None

    # -- subscribing ---------------------------------------------------------------------------
    def on_connect(self, callback: OnConnect) -> None:
        self._on_connect.append(callback)

    async def subscribe(self, topic: str, handler: Handler, qos: int = 1) -> None:
        self._subscribe(topic, (handler, None))

    async def subscribe_raw(self, topic: str, handler: RawHandler, qos: int = 1) -> None:
        self._subscribe(topic, (None, handler))

    def _subscribe(self, topic: str, handlers: tuple[Handler | None, RawHandler | None]) -> None:
        self._subs[topic] = handlers
        if self._unheard:
            self._arrivals.put_first(self._unheard.take(self._heard))
        if self._connected:
            self.broker.retained(self, topic)

    async def unsubscribe(self, topic: str) -> None:
        self._subs.pop(topic, None)

    def route(self, topic: str, handler: Handler | None) -> None:
        if handler is None:
            self._routes.pop(topic, None)
        else:
            self._routes[topic] = handler
            if self._unheard:
                self._arrivals.put_first(self._unheard.take_topic(topic))

    def wants(self, topic: str) -> bool:
        return self._connected and any(filter_allows(p, topic) for p in self._subs)

    # -- publishing ----------------------------------------------------------------------------
    def post(
        self, topic: str, message: Wire, *, qos: int = 1, retain: bool = False, lazy: bool = False
    ) -> None:
        self.stats["posted"] += 1
        self._publish(topic, encode(message, self.inbox, self.epoch), retain)

    async def publish(
        self,
        topic: str,
        message: Wire,
        *,
        qos: int = 1,
        retain: bool = False,
        timeout: float | None = None,
    ) -> None:
        self._publish(topic, encode(message, self.inbox, self.epoch), retain)

    async def publish_raw(self, topic: str, payload: bytes, *, qos: int = 1) -> None:
        self._publish(topic, payload, False)

    def _publish(self, topic: str, payload: bytes, retain: bool) -> None:
        if self._closed:
            raise BusClosed(f"bus {self.name} is closed")
        self.stats["published"] += 1
        self.broker.publish(self._principal, topic, payload, retain=retain)

    def reply_error(
        self, reply_to: str | None, message: str, *, code: str = "error", about: str | None = None
    ) -> None:
        """Tell a sender what was wrong with what it sent (if it said where to)."""
        if reply_to and reply_to != self.inbox:
            self.post(reply_to, Error(message=message, code=code, about=about))

    # -- receiving -----------------------------------------------------------------------------
    def arrive(self, topic: str, payload: bytes) -> None:
        self._arrivals.put_nowait((topic, payload))

    def backlog(self) -> int:
        return self._arrivals.qsize()

    def backlog_ages(self) -> tuple[float, float]:
        return 0.0, 0.0

    def _handlers(self, topic: str) -> tuple[Handler | None, RawHandler | None]:
        routed = self._routes.get(topic)  # (brought by a wildcard subscription)
        if routed is not None:
            return routed, None
        return next((h for p, h in self._subs.items() if filter_allows(p, topic)), (None, None))

    def _heard(self, topic: str) -> bool:
        return self._handlers(topic) != (None, None)

    async def _receive(self) -> None:
        arrivals = self._arrivals
        while True:
            if arrivals.empty():
                await arrivals.arrival()
                continue
            item = arrivals.get_nowait()
            topic, payload = item
            if not isinstance(item, Released):  # (a kept one was counted when it came)
                self.stats["payloads_in"] += 1
            handler, raw_handler = self._handlers(topic)
            if raw_handler is not None:
                await self._receiver.raw(raw_handler, topic, payload)
            elif handler is not None:
                await self._receiver.handle_all(topic, handler, decode_many(payload))
            else:  # not subscribed or routed yet: kept for it (or dropped in time)
                self._unheard.hold(topic, payload)


def _conforms(transport: MemoryTransport) -> Transport:
    return transport  # mypy checks here that MemoryTransport is a Transport
