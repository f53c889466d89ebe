"""What a party needs of a transport: the `Transport` interface the master, the slave and
the SDK are written against.

`protocol.transport.bus.Bus` (MQTT) is the real one; `protocol.transport.memory` is an
in-process one for tests, with the same topics, identities and publish ACL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from protocol.transport.message_counts import MessageCounts
from protocol.wire.codec import DecodeError, Envelope
from protocol.wire.messages import Wire

Handler = Callable[[Wire, str | None], Awaitable[None]]
"""A subscriber: called with the decoded message and the sender's inbox (or None)."""

RawHandler = Callable[[str, bytes], Awaitable[None]]
"""A raw subscriber: called with the topic and the payload, before anything is decoded."""

OnConnect = Callable[[], Awaitable[None]]


class Intake(Protocol):
    """A subscriber's own admission of what arrives on its topics (the master's: who sent
    it, from the topic; its rate limit before decoding; per-kind size limits; big payloads
    decoded off the loop). The transport's one dispatch loop asks `admit` for a payload's
    messages, then hands them to `deliver` one by one, letting the loop breathe every
    `yield_every` (0: never): see `protocol.transport.inbound.subscribe_intake`."""

    yield_every: int

    async def admit(self, topic: str, payload: bytes) -> list[Envelope | DecodeError] | None:
        """The payload's messages, decoded (bad ones as DecodeError); None: refused whole."""

    async def deliver(self, topic: str, item: Envelope | DecodeError) -> None:
        """One admitted message (or what was wrong with it) to its handler."""


Will = tuple[str, str, str]
"""(topic, kind, id) of the `Gone` the broker announces when a party vanishes."""


class BusClosed(RuntimeError):
    """The bus was closed while an operation was waiting on it."""


class BusRefused(BusClosed):
    """The broker refused us for good: bad credentials, or a certificate we do not trust.
    Retrying cannot help, so the bus stops and says why."""


class PublishDropped(BusRefused):
    """The broker kept closing the connection as it published one message: its ACL
    forbids that topic to this principal (an operator's topic to a team's, say)."""


class ConnectedElsewhere(BusRefused):
    """Another connection with this one's principal (or client id) kept taking it over:
    another process uses the same credentials. The bus gave up (see
    `protocol.transport.reconnects`)."""


class BrokerUnreachable(TimeoutError):
    """No connection to the broker in the time given; the message says what the last
    attempt met (refused, an unknown host, no answer, TLS failing)."""


class Transport(Protocol):
    """A party's connection to the cluster: post and publish to topics, subscribe to them,
    and be told of every (re)connect. Identity is the connection's principal: the broker
    lets it publish only under its own name, whatever a payload says."""

    inbox: str | None  # this party's own topic: every envelope's reply_to
    epoch: int  # the leadership epoch stamped on what it sends (masters only; else 0)
    incarnation: str  # this connection's: a new one after every reconnect
    stats: dict[str, int]
    messages: MessageCounts
    log: Any
    refused: BusRefused | None  # why it will not connect again, once it will not

    @property
    def gave_up(self) -> asyncio.Event:
        """Set once it will not connect again (`refused` says why)."""

    @property
    def principal(self) -> str | None:
        """Who the broker knows this connection as (None without authentication)."""

    @property
    def connected(self) -> bool: ...

    async def start(
        self, *, wait: bool = True, timeout: float | None = 30.0, tries: int | None = None
    ) -> None:
        """Connect (and, with `wait`, wait until connected: BrokerUnreachable after
        `timeout` seconds or `tries` failed attempts; BusRefused if never)."""

    async def close(self, flush_timeout: float = 2.0, *, abandon: bool = False) -> None: ...

    def on_connect(self, callback: OnConnect) -> None: ...

    async def subscribe(self, topic: str, handler: Handler, qos: int = 1) -> None: ...

    async def subscribe_raw(self, topic: str, handler: RawHandler, qos: int = 1) -> None: ...

    async def unsubscribe(self, topic: str) -> None: ...

    def route(self, topic: str, handler: Handler | None) -> None:
        """Hand what arrives on `topic` to `handler` (None: stop) without subscribing to
        it: a wildcard subscription of this transport must bring it (a fleet's slaves)."""

    def post(
        self, topic: str, message: Wire, *, qos: int = 1, retain: bool = False, lazy: bool = False
    ) -> None: ...

    async def publish(
        self,
        topic: str,
        message: Wire,
        *,
        qos: int = 1,
        retain: bool = False,
        timeout: float | None = None,
    ) -> None: ...

    async def publish_raw(self, topic: str, payload: bytes, *, qos: int = 1) -> None: ...

    def reply_error(
        self, reply_to: str | None, message: str, *, code: str = "error", about: str | None = None
    ) -> None: ...

    def backlog(self) -> int: ...

    def backlog_ages(self) -> tuple[float, float]: ...


class Connector(Protocol):
    """Makes a party's transport (a framework driver makes its own, knowing its inbox only
    once it starts); `principal` is who the connection will be."""

    @property
    def principal(self) -> str | None: ...

    def __call__(self, *, name: str, inbox: str | None, will: Will | None) -> Transport: ...
