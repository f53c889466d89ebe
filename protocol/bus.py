"""One async message bus over MQTT (aiomqtt), used by master, slaves, frameworks and executors.

    async with Bus(url, name="slave", client_id="slave-s1", inbox=topics.slave("s1"),
                   will=(topics.gone("slave", "s1"), "slave", "s1")) as bus:
        bus.subscribe(topics.slave("s1"), dispatcher)
        await bus.publish(topics.master, Register(...))     # returns once the broker has it

What it does for every party:

- connects with retry and exponential backoff, and after a broker restart reconnects and
  re-subscribes by itself (`on_connect` callbacks then re-announce the party);
- publishes with QoS 1 by default; `publish` returns when the broker acknowledged the
  message and retries across reconnects until then, `post` does the same in the background;
- decodes every arriving message (the codec validates it) and dispatches it by type; bad
  input is logged and, where the sender named its inbox, answered with an `Error`;
- sets a Last Will (`Gone`, carrying this connection's incarnation) so the broker
  announces a party that vanishes without saying goodbye;
- turns Nagle off on its socket (TCP_NODELAY): without it a QoS 1 round trip is ~88 ms;
- shuts down cleanly: cancels its tasks until they are really done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Self, TypeVar, cast

import aiomqtt

from protocol import logs
from protocol.backlog import StampedQueue
from protocol.brokers import MAX_PACKET_BYTES, BrokerURL
from protocol.codec import (
    MAX_BATCH,
    DecodeError,
    Envelope,
    decode_many,
    encode,
    encode_batch,
    encode_list,
)
from protocol.message_counts import MessageCounts
from protocol.messages import LISTS, Error, Gone, Wire

Handler = Callable[[Wire, str | None], Awaitable[None]]
"""A subscriber: called with the decoded message and the sender's inbox (or None)."""

RawHandler = Callable[[str, bytes], Awaitable[None]]
"""A raw subscriber: called with the topic and the payload, before anything is decoded."""

Posted = bytes | tuple[Wire, int]
"""A post waiting for its turn's flush: encoded, or a message and its epoch (see post)."""

W = TypeVar("W", bound=Wire)
OnConnect = Callable[[], Awaitable[None]]

MQTT_LOG = logging.getLogger("mqtt")
# bytes in one MQTT payload at most: what the brokers we start (and the compose cluster's)
# take, less room for the topic and the headers
MAX_PAYLOAD = MAX_PACKET_BYTES - 64 * 1024
MAX_DEFERRALS = 32  # loop turns a batch may wait for a backlog of arrivals to be handled
MAX_HELD = MAX_BATCH  # posts one flush sends (a flush of thousands would stall the loop)
MAX_MATCHED = 4096  # topics whose handler is remembered (see _handler_for)
LAZY_DELAY = 0.02  # seconds a lazy post (the event stream) waits to share a batch
RECEIVE_TURN = 0.005  # seconds of dispatching a backlog before the loop lets others run
NODELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]


@dataclass(slots=True)
class Outgoing:
    """One payload on its way to the broker; `done`, if someone awaits it."""

    topic: str
    payload: bytes
    qos: int
    retain: bool = False
    done: asyncio.Future[None] | None = None

    def succeed(self) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_result(None)

    def fail(self, error: BaseException) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(error)


class BusClosed(RuntimeError):
    """The bus was closed while an operation was waiting on it."""


class BusRefused(BusClosed):
    """The broker refused us for good: bad credentials, or a certificate we do not trust.
    Retrying cannot help, so the bus stops and says why."""


def refusal(error: aiomqtt.MqttError) -> str | None:
    """Why a failed connection attempt is final, or None if it is worth retrying."""
    said = str(error).lower()
    if isinstance(error, aiomqtt.MqttCodeError) and ("authoriz" in said or "password" in said):
        return f"the broker refused the credentials ({error})"
    cause = error.__cause__ or error.__context__
    if isinstance(cause, ssl.SSLCertVerificationError):
        return f"the broker's certificate is not trusted: {cause.verify_message} (--ca?)"
    return None


async def cancel_and_wait(task: asyncio.Task[Any], timeout: float = 5.0) -> None:
    """Cancel a task and wait until it is really done.

    On Python 3.11 a task blocked in aiomqtt's `publish(qos=1)` sometimes swallows the
    first cancel, so keep cancelling until it has finished.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=0.1)
        if loop.time() > deadline:
            break
    if task.done() and not task.cancelled():
        task.exception()  # mark retrieved: errors were logged where they happened


async def first_of(*events: asyncio.Event, timeout: float | None = None) -> None:
    """Wait until any of `events` is set, or `timeout` passes (the caller then looks which)."""
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


class Bus:
    def __init__(
        self,
        broker: BrokerURL | str,
        *,
        name: str,
        client_id: str | None = None,
        inbox: str | None = None,
        will: tuple[str, str, str] | None = None,
        persistent: bool = False,
        keepalive: int = 10,
        log: Any = None,
    ) -> None:
        """
        name:       who this is, for logs.
        client_id:  the MQTT client identifier; stable ids let a persistent session resume.
        inbox:      this party's own topic; written into every envelope as reply_to.
        will:       (topic, kind, id) for the Last Will `Gone` message.
        persistent: keep the broker session (and QoS 1 messages queued for us) across
                    disconnects; needs a stable client_id.
        """
        self.broker = BrokerURL.parse(broker) if isinstance(broker, str) else broker
        self.name = name
        self.client_id = client_id or f"{name}-{uuid.uuid4().hex[:12]}"
        self.inbox = inbox
        self.persistent = persistent
        self.keepalive = keepalive
        self.incarnation = ""
        self.log = log or logs.get("bus", party=name)
        self._will = will
        self._subs: dict[str, tuple[Handler | None, RawHandler | None, int]] = {}
        # topic -> its handlers, as the patterns matched it (aiomqtt's matching is slow;
        # a party hears from a bounded set of topics, and the cache is emptied when the
        # subscriptions change)
        self._matched: dict[str, tuple[Handler | None, RawHandler | None]] = {}
        # topic -> its handler, for topics a wildcard subscription already brings (one
        # process's logical slaves: one subscription at the broker, not one each)
        self._routes: dict[str, Handler] = {}
        self._on_connect: list[OnConnect] = []
        self._client: aiomqtt.Client | None = None
        self._connected = asyncio.Event()
        self._closing = False
        self.refused: BusRefused | None = None
        self._gave_up = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        # The send path (see _send): what the MQTT client holds until the broker
        # acknowledges it, by message id, and what waits for the next connection.
        self._unacked: dict[int, Outgoing] = {}
        self._waiting: list[Outgoing] = []
        self._sent_all = asyncio.Event()  # nothing unacknowledged and nothing waiting
        self._sent_all.set()
        # posted this turn, by topic: encoded, or (a kind that travels in lists) the message
        # and its epoch, encoded with the others of its run at the flush
        self._outbox: dict[tuple[str, int], list[Posted]] = {}
        self._lazy: dict[tuple[str, int], list[Posted]] = {}  # posted lazy=True
        self._lazy_flush: asyncio.TimerHandle | None = None
        self._flush_scheduled = False
        self._deferrals = 0
        self._held = 0  # posts waiting in the outbox for a flush
        self._unwritten = False  # handed to paho since the socket was last written
        self._in_batch = False  # handling the messages of an arriving batch (busy)
        self._write: Callable[[], None] | None = None  # writes paho's socket (connected)
        self.connections = 0  # how many times we have connected (for tests and logs)
        # Leadership epochs (see protocol.messages.Leader): a master stamps its own on
        # everything it sends; every party drops what arrives with an older epoch than
        # the newest it has seen, so a deposed master is not acted upon.
        self.epoch = 0
        self.fence = 0
        # asked before every reconnect; False ends the bus (a master that may no longer lead)
        self.may_reconnect: Callable[[], Awaitable[bool]] | None = None
        # traffic counters: messages posted/received, MQTT payloads published/received
        self.stats = {"posted": 0, "published": 0, "received": 0, "payloads_in": 0, "fenced": 0}
        self.messages = MessageCounts()  # what the handlers were given, by type and outcome

    # -- lifecycle ---------------------------------------------------------------------------
    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self, *, wait: bool = True, timeout: float | None = 30.0) -> None:
        self._runner = asyncio.create_task(self._run(), name=f"bus-{self.name}")
        if wait:
            await self.wait_connected(timeout)

    async def wait_connected(self, timeout: float | None = None) -> None:
        """Wait until connected; raises BusRefused if the broker will never let us in."""
        await first_of(self._connected, self._gave_up, timeout=timeout)
        if self.refused is not None:
            raise self.refused
        if not self._connected.is_set():
            raise TimeoutError(f"no connection to {self.broker} within {timeout}s")

    @property
    def gave_up(self) -> asyncio.Event:
        """Set once the bus will not connect again (refused, or `may_reconnect` said no)."""
        return self._gave_up

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    async def close(self, flush_timeout: float = 2.0, *, abandon: bool = False) -> None:
        """Send what `post` queued (waiting briefly for the broker to take it), disconnect
        cleanly, stop every task.

        `abandon`: send nothing more, not even what is queued (a deposed master)."""
        if self._lazy_flush is not None:
            self._lazy_flush.cancel()
            self._lazy_flush = None
        if abandon:
            self._outbox.clear()
            self._lazy.clear()
            self._waiting.clear()
            self._closing = True
        if self._outbox:
            self._flush(now=True)  # not deferred behind a backlog: nothing will handle it
        if self._lazy:
            self._flush_lazy()
        if not abandon:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._sent_all.wait(), flush_timeout)
            if self._background:  # on_connect callbacks still announcing us
                await asyncio.wait(set(self._background), timeout=flush_timeout)
        self._closing = True
        for task in list(self._background):
            await cancel_and_wait(task)
        if self._runner is not None:
            await cancel_and_wait(self._runner)
            self._runner = None
        self._connected.clear()
        self._fail_all(BusClosed(f"bus {self.name} closed before the broker had it"))

    # -- subscribing ---------------------------------------------------------------------------
    def on_connect(self, callback: OnConnect) -> None:
        """Run `callback` after every (re)connect, once subscriptions are in place."""
        self._on_connect.append(callback)

    async def subscribe(self, topic: str, handler: Handler, qos: int = 1) -> None:
        self._subs[topic] = (handler, None, qos)
        self._matched.clear()
        await self._subscribe(topic, qos)

    def route(self, topic: str, handler: Handler | None) -> None:
        """Hand what arrives on `topic` to `handler` (None: stop) without subscribing to it
        at the broker: a wildcard subscription of this bus must bring it."""
        if handler is None:
            self._routes.pop(topic, None)
        else:
            self._routes[topic] = handler

    async def subscribe_raw(self, topic: str, handler: RawHandler, qos: int = 1) -> None:
        """Take payloads as they arrive (the subscriber decodes them itself)."""
        self._subs[topic] = (None, handler, qos)
        self._matched.clear()
        await self._subscribe(topic, qos)

    async def _subscribe(self, topic: str, qos: int) -> None:
        client = self._client
        if client is not None and self.connected:
            with contextlib.suppress(aiomqtt.MqttError):  # re-done on reconnect anyway
                await client.subscribe(topic, qos=qos)

    async def unsubscribe(self, topic: str) -> None:
        self._subs.pop(topic, None)
        self._matched.clear()
        client = self._client
        if client is not None and self.connected:
            with contextlib.suppress(aiomqtt.MqttError):
                await client.unsubscribe(topic)

    # -- publishing ----------------------------------------------------------------------------
    async def publish(
        self,
        topic: str,
        message: Wire,
        *,
        qos: int = 1,
        retain: bool = False,
        timeout: float | None = None,
    ) -> None:
        """Publish and return once the broker has it (for QoS 1: its PUBACK arrived).

        While the broker is away this waits and retries after the reconnect, so a message
        is not lost to a broker restart; `timeout` bounds the wait.
        """
        payload = encode(message, self.inbox, self.epoch)
        await asyncio.wait_for(self._publish_bytes(topic, payload, qos, retain), timeout)

    async def publish_raw(self, topic: str, payload: bytes, *, qos: int = 1) -> None:
        """Publish bytes as they are (tests use it to send malformed input)."""
        await self._publish_bytes(topic, payload, qos, False)

    async def _publish_bytes(self, topic: str, payload: bytes, qos: int, retain: bool) -> None:
        if self.refused is not None:
            raise self.refused
        if self._closing:
            raise BusClosed(f"bus {self.name} is closed")
        if self._outbox:
            self._flush(now=True)  # what was posted before goes first (in the order made)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._send(Outgoing(topic, payload, qos, retain, done))
        await done

    # -- the send path -------------------------------------------------------------------------
    def _send(self, out: Outgoing) -> None:
        """Hand a payload to the MQTT client now, in this call (it writes it to the socket
        when the loop next comes round). A QoS 1 payload is kept until the broker
        acknowledges it; if the connection is lost first, it is sent again, in order, after
        the reconnect (at least once, as QoS 1 promises). Without a connection it waits."""
        self._sent_all.clear()
        if len(out.payload) > MAX_PAYLOAD:  # the broker would drop the connection for it,
            # and every reconnect would send it again: it fails, alone, here
            limit = f"{len(out.payload)} bytes is over the broker's limit of {MAX_PAYLOAD}"
            self._unpublishable(out, ValueError(limit))
            return
        client = self._client
        if client is None or not self._connected.is_set() or self._waiting:
            self._waiting.append(out)
            return
        try:
            info = client._client.publish(out.topic, out.payload, out.qos, out.retain)
        except ValueError as e:  # a topic or payload MQTT cannot carry: this one only
            self._unpublishable(out, e)
            return
        self.stats["published"] += 1
        if info.rc != 0:  # the connection is going: the reconnect sends it
            self._waiting.append(out)
        elif out.qos == 0 or info.is_published():
            out.succeed()
            self._check_sent_all()
        else:
            self._unacked[info.mid] = out

    def _unpublishable(self, out: Outgoing, error: ValueError) -> None:
        self.log.error(
            "bus.unpublishable", topic=out.topic, bytes=len(out.payload), error=str(error)
        )
        out.fail(error)
        self._check_sent_all()

    def _on_acknowledged(self, mid: int) -> None:
        out = self._unacked.pop(mid, None)
        if out is not None:
            out.succeed()
            self._check_sent_all()

    def _check_sent_all(self) -> None:
        if not self._unacked and not self._waiting:
            self._sent_all.set()

    def _watch_acknowledgements(self, client: aiomqtt.Client) -> None:
        """Learn of each PUBACK from paho, beside aiomqtt (which still hears them)."""
        paho = client._client
        inner = paho.on_publish

        def on_publish(*args: Any) -> None:  # (client, userdata, mid, reason, properties)
            self._on_acknowledged(args[2])
            if inner is not None:
                inner(*args)

        paho.on_publish = on_publish

    def _write_promptly(self, client: aiomqtt.Client) -> None:
        """Write what paho queues at the end of this loop turn, or sooner (`_write_out`),
        rather than as aiomqtt does: it registers the socket for writing through the
        self-pipe, and the write comes two turns later, after two epoll_ctl calls per
        packet. The socket is watched for writability only when the kernel took less
        than all of it."""
        paho, loop = client._client, asyncio.get_running_loop()
        disconnected: asyncio.Future[None] = client._disconnected
        soon: asyncio.Handle | None = None
        fd = -1

        def write() -> None:
            nonlocal soon
            if soon is not None:
                soon.cancel()
                soon = None
            self._unwritten = False
            try:
                paho.loop_write()
            except Exception as e:  # a broken pipe: the connection is gone (as aiomqtt does)
                if not disconnected.done():
                    disconnected.set_exception(e)
                return
            if paho.want_write() and paho.socket() is not None:  # the socket is full: go on
                loop.add_writer(fd, write)  # when it can take more (not once it is closed)

        def register(_client: Any, _userdata: Any, sock: Any) -> None:
            nonlocal soon, fd
            fd = sock.fileno()
            self._unwritten = True
            if soon is None:
                soon = loop.call_soon(write)

        paho.on_socket_register_write = register
        self._write = write

    def _resend_waiting(self) -> None:
        """After a (re)connect: what the last connection left unacknowledged, then what
        was posted while there was none, in the order it was sent."""
        waiting, self._waiting = self._waiting, []
        for out in waiting:
            self._send(out)
        self._check_sent_all()

    def _fail_all(self, error: BaseException) -> None:
        """Nothing queued will be sent: tell whoever awaits it."""
        for out in [*self._unacked.values(), *self._waiting]:
            out.fail(error)
        self._unacked.clear()
        self._waiting.clear()
        self._sent_all.set()

    def _connection_lost(self) -> None:
        lost = list(self._unacked.values())  # in the order they were sent
        self._unacked.clear()
        self._waiting[:0] = lost

    def post(
        self, topic: str, message: Wire, *, qos: int = 1, retain: bool = False, lazy: bool = False
    ) -> None:
        """Publish in the background (same guarantees as `publish`, without waiting).

        Posts to one topic in one turn of the event loop leave together as one MQTT
        message (a batch) and in the order they were made: under load this saves most
        of the per-message cost; when idle it costs nothing but that one turn. Among them,
        a run of status updates or acknowledgements (the kinds in `LISTS`) goes as one list
        message, encoded (and on arrival validated) in one pass.

        `lazy`: for what only observers read (the event stream). It is gathered for
        `LAZY_DELAY` and sent as one batch, off the path of the calls being handled.
        """
        self.stats["posted"] += 1
        if retain:
            self._send(Outgoing(topic, encode(message, self.inbox, self.epoch), qos, True))
            return
        key = (topic, qos)
        if lazy:  # (encoded at the flush, off the path of the call being handled)
            self._lazy.setdefault(key, []).append(self._deferred(message))
            if self._lazy_flush is None:
                self._lazy_flush = asyncio.get_running_loop().call_later(
                    LAZY_DELAY, self._flush_lazy
                )
            return
        pending = self._outbox.get(key)
        if pending is None and not self._outbox and not self._in_batch:
            # the first of a turn goes at once, to the socket too (a task's next step
            # waits for it), even with more arrived behind; whatever follows it is batched
            # (the same topic behind it). What answers a batch is batched: busy parties
            # send batches, and then this would be one more packet and write per batch.
            self._send(Outgoing(topic, encode(message, self.inbox, self.epoch), qos))
            self._write_out()
            self._outbox[key] = []
        else:
            entry = self._deferred(message)
            self._held += 1
            if pending is not None:
                pending.append(entry)
                return
            self._outbox[key] = [entry]
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _deferred(self, message: Wire) -> Posted:
        """A post that waits for a flush: a kind that travels in lists waits unencoded, to
        be encoded with its run (one pass for the run); any other is encoded now."""
        if type(message) in LISTS:
            return (message, self.epoch)
        return encode(message, self.inbox, self.epoch)

    def _flush(self, *, now: bool = False) -> None:
        # While more arrives to be handled, hold the batch a little longer (bounded).
        if not now and self.backlog() and self._deferrals < MAX_DEFERRALS and self._held < MAX_HELD:
            self._deferrals += 1
            asyncio.get_running_loop().call_soon(self._flush)
            return
        self._deferrals = 0
        self._held = 0
        self._flush_scheduled = False
        outbox, self._outbox = self._outbox, {}
        if not now:  # at most MAX_HELD posts a turn; the rest (in order) the next turn
            outbox, self._outbox = _split(outbox, MAX_HELD)
            self._held = sum(map(len, self._outbox.values()))
            if self._outbox:
                self._flush_scheduled = True
                asyncio.get_running_loop().call_soon(self._flush)
        self._send_batches(outbox)

    def _flush_lazy(self) -> None:
        self._lazy_flush = None
        lazy, self._lazy = self._lazy, {}
        self._send_batches(lazy)

    def _send_batches(self, outbox: dict[tuple[str, int], list[Posted]]) -> None:
        for (topic, qos), posted in outbox.items():
            payloads = self._encoded(posted)
            chunk: list[bytes] = []
            size = 0
            for payload in payloads:  # at most MAX_BATCH messages and MAX_PAYLOAD bytes a batch
                if chunk and (len(chunk) == MAX_BATCH or size + len(payload) > MAX_PAYLOAD):
                    self._send_chunk(topic, qos, chunk)
                    chunk, size = [], 0
                chunk.append(payload)
                size += len(payload) + 8  # (msgpack's framing of each item, at most)
            if chunk:  # (an empty list sends nothing)
                self._send_chunk(topic, qos, chunk)

    def _encoded(self, posted: list[Posted]) -> list[bytes]:
        """What was posted to one topic, encoded in order: each run of one kind that
        travels in lists (and one epoch) as list messages of at most MAX_BATCH items."""
        out: list[bytes] = []
        run: list[Wire] = []
        run_epoch = 0
        for entry in posted:
            if isinstance(entry, bytes):
                out.extend(self._listed(run, run_epoch))
                run = []
                out.append(entry)
                continue
            message, epoch = entry
            if run and (
                type(message) is not type(run[0]) or epoch != run_epoch or len(run) == MAX_BATCH
            ):
                out.extend(self._listed(run, run_epoch))
                run = []
            run.append(message)
            run_epoch = epoch
        out.extend(self._listed(run, run_epoch))
        return out

    def _listed(self, run: list[Wire], epoch: int) -> list[bytes]:
        if len(run) <= 1:
            return [encode(message, self.inbox, epoch) for message in run]
        data = encode_list(run, self.inbox, epoch)
        if len(data) <= MAX_PAYLOAD:
            return [data]
        half = len(run) // 2  # too big for one payload: in halves (each may go alone)
        return self._listed(run[:half], epoch) + self._listed(run[half:], epoch)

    def _send_chunk(self, topic: str, qos: int, chunk: list[bytes]) -> None:
        data = chunk[0] if len(chunk) == 1 else encode_batch(chunk, self.inbox)
        self._send(Outgoing(topic, data, qos))

    def reply_error(
        self, reply_to: str | None, message: str, *, code: str = "error", about: str | None = None
    ) -> None:
        """Tell a sender what was wrong with what it sent (if it said where to)."""
        if reply_to and reply_to != self.inbox:
            self.post(reply_to, Error(message=message, code=code, about=about))

    # -- the connection loop --------------------------------------------------------------------
    def _client_for(self, incarnation: str) -> aiomqtt.Client:
        will = None
        if self._will is not None:
            topic, kind, party_id = self._will
            gone = Gone(kind=kind, id=party_id, incarnation=incarnation)
            will = aiomqtt.Will(topic, encode(gone), qos=1, retain=False)
        return aiomqtt.Client(
            self.broker.host,
            self.broker.port,
            username=self.broker.username,
            password=self.broker.password,
            # an authenticated connection's client id is its principal (the broker insists)
            identifier=self.broker.username or self.client_id,
            tls_context=self.broker.ssl_context(),
            clean_session=not self.persistent,
            keepalive=self.keepalive,
            will=will,
            socket_options=NODELAY,
            max_inflight_messages=1000,
            timeout=10,
            logger=MQTT_LOG,
            queue_type=StampedQueue,  # stamped: how long arrivals wait (see backlog())
        )

    async def _run(self) -> None:
        delay = 0.05
        while not self._closing:
            incarnation = uuid.uuid4().hex[:16]
            try:
                async with self._client_for(incarnation) as client:
                    self._client = client
                    self.incarnation = incarnation
                    self._watch_acknowledgements(client)
                    self._write_promptly(client)
                    for topic, (_, _, qos) in list(self._subs.items()):
                        await client.subscribe(topic, qos=qos)
                    self.connections += 1
                    self._connected.set()
                    self._resend_waiting()
                    self.log.info(
                        "bus.connected",
                        broker=str(self.broker),
                        client_id=self.client_id,
                        incarnation=incarnation,
                        reconnect=self.connections > 1,
                    )
                    delay = 0.05
                    for callback in self._on_connect:
                        self._spawn(callback())
                    try:
                        await self._receive(client)
                    finally:
                        await self._drain(client)
            except aiomqtt.MqttError as e:
                if self._closing:
                    break
                why = refusal(e)
                if why is not None:
                    self.refused = BusRefused(why)
                    self.log.error("bus.refused", broker=str(self.broker), reason=why)
                    self._gave_up.set()
                    self._fail_all(self.refused)
                    break
                level = "warning" if self.connected else "debug"
                getattr(self.log, level)(
                    "bus.disconnected", broker=str(self.broker), error=str(e), retry_in=delay
                )
            finally:
                self._connected.clear()
                self._client, self._write, self._unwritten = None, None, False
                self._connection_lost()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
            allowed = self.may_reconnect
            if allowed is not None and not self._closing and not await allowed():
                self.log.warning("bus.reconnect_forbidden", broker=str(self.broker))
                self.refused = BusRefused("this party may no longer connect")
                self._gave_up.set()
                self._fail_all(self.refused)
                break

    async def _receive(self, client: aiomqtt.Client) -> None:
        """Dispatch arriving messages until the connection ends.

        aiomqtt's iterator makes a task for every message; when messages are already
        queued we take them directly, which matters at thousands of messages a second.
        """
        queue = getattr(client, "_queue", None)
        disconnected = getattr(client, "_disconnected", None)
        if queue is None or disconnected is None:  # aiomqtt changed: use its iterator
            async for mqtt_message in client.messages:
                await self._dispatch(mqtt_message)
            return
        loop = asyncio.get_running_loop()
        turn_ends = loop.time() + RECEIVE_TURN
        while True:
            if not queue.empty():
                await self._dispatch(queue.get_nowait())
                self._write_out()
                if loop.time() > turn_ends:  # a backlog (a flood) must not starve the rest
                    await asyncio.sleep(0)
                    turn_ends = loop.time() + RECEIVE_TURN
                continue
            turn_ends = loop.time() + RECEIVE_TURN
            getter = asyncio.ensure_future(queue.get())
            try:
                await asyncio.wait({getter, disconnected}, return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:
                getter.cancel()
                raise
            if getter.done():
                await self._dispatch(getter.result())
                self._write_out()
                continue
            getter.cancel()
            cause = disconnected.exception() if not disconnected.cancelled() else None
            raise aiomqtt.MqttError("disconnected") from cause

    def _write_out(self) -> None:
        """What handling a message sent goes to the socket now, before the next message
        is handled (else it waits for the loop to come round, after that message)."""
        if self._unwritten and self._write is not None:
            self._unwritten = False
            self._write()

    def backlog(self) -> int:
        """Messages received and not yet dispatched."""
        queue = getattr(self._client, "_queue", None)
        return queue.qsize() if queue is not None else 0

    def backlog_ages(self) -> tuple[float, float]:
        """Seconds the oldest message not yet dispatched has waited, and seconds the last
        dispatched one had waited (0, 0 while not connected)."""
        queue = getattr(self._client, "_queue", None)
        if not isinstance(queue, StampedQueue):
            return 0.0, 0.0
        return queue.oldest_age(), queue.last_wait

    async def _drain(self, client: aiomqtt.Client) -> None:
        """Dispatch what was received (and already acknowledged) before the connection broke.

        aiomqtt stops iterating at a disconnect even when its queue still holds messages;
        the broker considers those delivered, so dropping them would lose them.
        """
        queue = getattr(client, "_queue", None)
        while queue is not None and not queue.empty() and not self._closing:
            await self._dispatch(queue.get_nowait())

    def _spawn(self, coro: Awaitable[None]) -> None:
        async def guarded() -> None:
            try:
                await coro
            except (asyncio.CancelledError, BusClosed):
                raise
            except Exception:
                self.log.exception("bus.callback_failed")

        task = asyncio.create_task(guarded())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _dispatch(self, mqtt_message: aiomqtt.Message) -> None:
        topic = mqtt_message.topic
        handler, raw_handler = self._handler_for(topic)
        payload = mqtt_message.payload
        if not isinstance(payload, bytes | bytearray):
            payload = str(payload).encode()
        self.stats["payloads_in"] += 1
        if raw_handler is not None:
            try:
                await raw_handler(topic.value, bytes(payload))
            except asyncio.CancelledError:
                raise
            except Exception:
                self.log.exception("bus.handler_failed", topic=topic.value)
            return
        if handler is None:
            return
        items = decode_many(bytes(payload))
        self._in_batch = len(items) > 1
        try:
            await self._handle_all(topic, handler, items)
        finally:
            self._in_batch = False

    async def _handle_all(
        self, topic: aiomqtt.Topic, handler: Handler, items: list[Envelope | DecodeError]
    ) -> None:
        for item in items:
            self.stats["received"] += 1
            kind = (item.type_name or "?") if isinstance(item, DecodeError) else item.message.TYPE
            self.messages.received[kind] += 1
            if isinstance(item, DecodeError):
                self.messages.outcomes[(kind, "refused", item.reason)] += 1
                self.log.warning(
                    "bus.bad_message",
                    topic=topic.value,
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
            if item.epoch:
                if item.epoch < self.fence:
                    self.stats["fenced"] += 1
                    self.messages.outcomes[(kind, "dropped", "fenced")] += 1
                    self.log.warning(
                        "bus.fenced",
                        topic=topic.value,
                        type=item.message.TYPE,
                        epoch=item.epoch,
                        newest=self.fence,
                    )
                    continue
                self.fence = item.epoch
            try:
                await self.messages.counted(handler, kind)(item.message, item.reply_to)
            except asyncio.CancelledError:
                raise
            except Exception:
                # A handler bug must not take the party down: log it with what arrived.
                self.log.exception("bus.handler_failed", topic=topic.value, type=item.message.TYPE)

    def _handler_for(self, topic: aiomqtt.Topic) -> tuple[Handler | None, RawHandler | None]:
        name = topic.value
        routed = self._routes.get(name)  # many slaves on one bus: one topic each
        if routed is not None:
            return routed, None
        exact = self._subs.get(name)
        if exact is not None:
            return exact[0], exact[1]
        found = self._matched.get(name)
        if found is None:
            found = (None, None)
            for pattern, (handler, raw_handler, _) in self._subs.items():
                if topic.matches(pattern):
                    found = (handler, raw_handler)
                    break
            if len(self._matched) >= MAX_MATCHED:
                self._matched.clear()
            self._matched[name] = found
        return found


class Dispatcher:
    """Routes messages to handlers by type; anything else is refused with an Error."""

    def __init__(self, bus: Bus, party: str) -> None:
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


def _split(
    outbox: dict[tuple[str, int], list[Posted]], most: int
) -> tuple[dict[tuple[str, int], list[Posted]], dict[tuple[str, int], list[Posted]]]:
    """The first `most` posts of `outbox` (by topic, each topic's in order), and the rest."""
    now: dict[tuple[str, int], list[Posted]] = {}
    later: dict[tuple[str, int], list[Posted]] = {}
    for key, posted in outbox.items():
        if most <= 0:
            later[key] = posted
        elif len(posted) <= most:
            now[key], most = posted, most - len(posted)
        else:
            now[key], later[key], most = posted[:most], posted[most:], 0
    return now, later
