"""One async message bus over MQTT (aiomqtt), used by master, slaves, frameworks and executors.

    async with Bus(url, name="slave", client_id="slave-s1", inbox=topics.slave("s1"),
                   will=(topics.gone("slave", "s1"), "slave", "s1")) as bus:
        bus.subscribe(topics.slave("s1"), dispatcher)
        await bus.publish(topics.master, Register(...))     # returns once the broker has it

What it does for every party:

- connects with retry and exponential backoff, and after a broker restart reconnects and
  re-subscribes by itself (`on_connect` callbacks then re-announce the party); says what
  it waits for while it has no broker, and stops when another connection keeps taking its
  principal over (`protocol.transport.reconnects`);
- publishes with QoS 1 by default; `publish` returns when the broker acknowledged the
  message and retries across reconnects until then (`protocol.transport.sending`), `post`
  does the same in the background;
- decodes every arriving message (the codec validates it) and dispatches it by type; bad
  input is logged and, where the sender named its inbox, answered with an `Error`; a
  retained message is read only where the master announces (leader, state);
- keeps what arrives before a handler is subscribed or routed for its topic (what a
  persistent session queued while the party was away comes the moment it connects) and
  hands it to that handler in order, before what came after it; bounded, and what no
  handler takes in time is dropped, said and counted (`protocol.transport.unheard`);
- sets a Last Will (`Gone`, carrying this connection's incarnation) so the broker
  announces a party that vanishes without saying goodbye;
- shuts down cleanly (cancels its tasks until they are really done), and leaves nothing
  running when it could not start (refused, timed out, cancelled).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Self

import aiomqtt

from protocol import logs
from protocol.tooling.brokers import BrokerError, BrokerURL
from protocol.transport.aio import cancel_and_wait, first_of, spawn_guarded, within
from protocol.transport.backlog import StampedQueue
from protocol.transport.base import (
    BrokerUnreachable,
    BusClosed,
    BusRefused,
    Handler,
    OnConnect,
    RawHandler,
    Will,
)
from protocol.transport.batching import Counted, Outgoing, Posted, chunked, encoded, split
from protocol.transport.fencing import EpochFence
from protocol.transport.inbound import Dispatcher, EnvelopeFilter, Receiver
from protocol.transport.message_counts import MessageCounts
from protocol.transport.mqtt_client import mqtt_client, mqtt_subscribe, mqtt_unsubscribe
from protocol.transport.paho_link import PahoLink
from protocol.transport.reconnects import SHORT, Reconnects
from protocol.transport.sending import MAX_PAYLOAD, SendPath
from protocol.transport.unheard import Released, Unheard
from protocol.wire.codec import MAX_BATCH, decode_many, encode, encode_batch, items_of
from protocol.wire.messages import LISTS, Error, Wire
from protocol.wire.topics import announced

__all__ = ["Bus", "BusClosed", "BusRefused", "Dispatcher", "cancel_and_wait", "first_of"]


MAX_DEFERRALS = 32  # loop turns a batch may wait for a backlog of arrivals to be handled
MAX_HELD = MAX_BATCH  # posts one flush sends (a flush of thousands would stall the loop)
MAX_MATCHED = 4096  # topics whose handler is remembered (see _handler_for)
LAZY_DELAY = 0.02  # seconds a lazy post (the event stream) waits to share a batch


class Bus:
    def __init__(
        self,
        broker: BrokerURL | str,
        *,
        name: str,
        client_id: str | None = None,
        inbox: str | None = None,
        will: Will | None = None,
        persistent: bool = False,
        keepalive: int = 10,
        log: Any = None,
        filters: Sequence[EnvelopeFilter] | None = None,
    ) -> None:
        """
        name:       who this is, for logs.
        client_id:  the MQTT client identifier; stable ids let a persistent session resume.
        inbox:      this party's own topic; written into every envelope as reply_to.
        will:       (topic, kind, id) for the Last Will `Gone` message.
        persistent: keep the broker session (and QoS 1 messages queued for us) across
                    disconnects; needs a stable client_id.
        filters:    what may reach the handlers (default: epoch fencing, see
                    protocol.transport.fencing).
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
        # topic -> its handlers, as the patterns matched it (aiomqtt's matching is slow; a
        # party hears from a bounded set of topics; emptied when the subscriptions change)
        self._matched: dict[str, tuple[Handler | None, RawHandler | None]] = {}
        # topic -> its handler, for topics a wildcard subscription brings (a fleet's slaves)
        self._routes: dict[str, Handler] = {}
        self._on_connect: list[OnConnect] = []
        self._client: aiomqtt.Client | None = None
        self._connected = asyncio.Event()
        self._closing = False
        self.refused: BusRefused | None = None
        self._gave_up = asyncio.Event()
        # pacing the attempts, telling a person what it waits for, and when to stop
        self._reconnects = Reconnects(self.log, self.broker, self.client_id)
        self._attempted = asyncio.Event()  # an attempt to connect failed
        self._runner: asyncio.Task[None] | None = None
        self._pumping: asyncio.Task[None] | None = None  # dispatching a connection's messages
        self._background: set[asyncio.Task[Any]] = set()
        # posted this turn, by topic: encoded, or (a kind that travels in lists) the message
        # and its epoch, encoded with the others of its run at the flush
        self._outbox: dict[tuple[str, int], list[Posted]] = {}
        self._lazy: dict[tuple[str, int], list[Posted]] = {}  # posted lazy=True
        self._lazy_flush: asyncio.TimerHandle | None = None
        self._flush_scheduled = False
        self._deferrals = 0
        self._held = 0  # posts waiting in the outbox for a flush
        self._in_batch = False  # handling the messages of an arriving batch (busy)
        self._link: PahoLink | None = None  # the connected client, driven through paho
        self.connections = 0  # how many times we have connected (for tests and logs)
        # the leadership epoch a master stamps on all it sends (protocol.transport.fencing)
        self.epoch = 0
        # asked before every reconnect; False ends the bus (a master that may no longer lead)
        self.may_reconnect: Callable[[], Awaitable[bool]] | None = None
        # traffic counters: messages posted/received, MQTT payloads published/received
        self.stats = {"posted": 0, "published": 0, "received": 0, "payloads_in": 0, "fenced": 0}
        self.messages = MessageCounts()  # what the handlers were given, by type and outcome
        self._sending = SendPath(self.log, self.stats)
        if filters is None:
            filters = [EpochFence(self.log, self.stats, self.messages)]
        self._receiver = Receiver(self.log, self.stats, self.messages, self.reply_error, filters)
        # what arrived with no handler for its topic yet, kept for the one that comes
        self._unheard = Unheard(self.log, self.stats, self.messages)
        self._reading: StampedQueue | None = None  # the queue the pump takes from now
        self._released: list[tuple[int, float, Released]] = []  # for the next pump (none runs)

    # -- lifecycle ---------------------------------------------------------------------------
    async def __aenter__(self) -> Self:
        try:
            await self.start()
        except BaseException:
            await self.close(abandon=True)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(
        self, *, wait: bool = True, timeout: float | None = 30.0, tries: int | None = None
    ) -> None:
        self._runner = asyncio.create_task(self._run(), name=f"bus-{self.name}")
        if wait:
            await self.wait_connected(timeout, tries=tries)

    async def wait_connected(
        self, timeout: float | None = None, *, tries: int | None = None
    ) -> None:
        """Wait until connected; raises BusRefused if the broker will never let us in, and
        BrokerUnreachable after `timeout` seconds or `tries` failed attempts (a command
        run once says at once that nothing listens; a party started before its broker
        waits for it), saying what the last attempt met. With `tries`, an attempt that
        waited out its answer is the last: another would wait as long for the same
        silence."""
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        reconnects = self._reconnects
        while not self._connected.is_set() and not self._gave_up.is_set():
            if tries is not None and (reconnects.failures >= tries or reconnects.unanswered):
                break
            self._attempted.clear()
            left = None if deadline is None else deadline - asyncio.get_running_loop().time()
            if left is not None and left <= 0:
                break
            await first_of(self._connected, self._gave_up, self._attempted, timeout=left)
        if self.refused is not None:
            raise self.refused
        if not self._connected.is_set():
            reason = reconnects.reason or "no answer yet"
            raise BrokerUnreachable(f"cannot reach the broker at {self.broker.bare}: {reason}")

    @property
    def gave_up(self) -> asyncio.Event:
        """Set once the bus will not connect again (refused, or `may_reconnect` said no)."""
        return self._gave_up

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    @property
    def principal(self) -> str | None:
        return self.broker.username

    async def close(self, flush_timeout: float = 2.0, *, abandon: bool = False) -> None:
        """Send what `post` queued (waiting briefly for the broker to take it), disconnect
        cleanly, stop every task; `abandon`: send nothing more (a deposed master)."""
        if self._lazy_flush is not None:
            self._lazy_flush.cancel()
            self._lazy_flush = None
        if abandon:
            self._outbox.clear()
            self._lazy.clear()
            self._sending.waiting.clear()
            self._closing = True
        if self._outbox:
            self._flush(now=True)  # not deferred behind a backlog: nothing will handle it
        if self._lazy:
            self._flush_lazy()
        if not abandon:
            with contextlib.suppress(TimeoutError):
                await within(self._sending.sent_all.wait(), flush_timeout)
            if self._background:  # on_connect callbacks still announcing us
                await asyncio.wait(set(self._background), timeout=flush_timeout)
        self._closing = True
        for task in list(self._background):
            await cancel_and_wait(task)
        if self._runner is not None:
            await cancel_and_wait(self._runner)
            self._runner = None
        if self._pumping is not None:
            await cancel_and_wait(self._pumping)
            self._pumping = None
        self._connected.clear()
        self._unheard.close()
        self._sending.fail_all(BusClosed(f"bus {self.name} closed before the broker had it"))

    # -- subscribing ---------------------------------------------------------------------------
    def on_connect(self, callback: OnConnect) -> None:
        """Run `callback` after every (re)connect, once subscriptions are in place."""
        self._on_connect.append(callback)

    async def subscribe(self, topic: str, handler: Handler, qos: int = 1) -> None:
        self._subs[topic] = (handler, None, qos)
        self._matched.clear()
        self._release(None)
        await self._subscribe(topic, qos)

    def route(self, topic: str, handler: Handler | None) -> None:
        """Hand what arrives on `topic` to `handler` (None: stop) without subscribing to it
        at the broker: a wildcard subscription of this bus must bring it."""
        if handler is None:
            self._routes.pop(topic, None)
        else:
            self._routes[topic] = handler
            self._release(topic)

    async def subscribe_raw(self, topic: str, handler: RawHandler, qos: int = 1) -> None:
        """Take payloads as they arrive (the subscriber decodes them itself)."""
        self._subs[topic] = (None, handler, qos)
        self._matched.clear()
        self._release(None)
        await self._subscribe(topic, qos)

    def _release(self, topic: str | None) -> None:
        """Hand what was kept for a handler not there yet to the handlers now there (for
        `topic` alone: a route's), through the pump, ahead of everything waiting there:
        before anything of their topics that came after them, and in arrival order among
        all so handed back. (Called as the handler appears, before any await: nothing of
        its topic is dispatched in between.)"""
        if not self._unheard:
            return
        released = (
            self._unheard.take(self._heard) if topic is None else self._unheard.take_topic(topic)
        )
        if not released:
            return
        if self._reading is not None:
            self._reading.put_first(released)
        else:  # (between two connections: the next pump takes them first)
            self._released += released

    def _heard(self, topic: str) -> bool:
        handler, raw_handler = self._handler_for(aiomqtt.Topic(topic))
        return handler is not None or raw_handler is not None

    async def _subscribe(self, topic: str, qos: int) -> None:
        client = self._client
        if client is not None and self.connected:
            with contextlib.suppress(aiomqtt.MqttError):  # re-done on reconnect anyway
                await mqtt_subscribe(client, topic, qos)

    async def unsubscribe(self, topic: str) -> None:
        self._subs.pop(topic, None)
        self._matched.clear()
        client = self._client
        if client is not None and self.connected:
            with contextlib.suppress(aiomqtt.MqttError):
                await mqtt_unsubscribe(client, topic)

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
        """Publish and return once the broker has it (QoS 1: its PUBACK came); while it is
        away, retry after the reconnect (not lost to a restart). `timeout` bounds the wait."""
        payload = encode(message, self.inbox, self.epoch)
        await within(self._publish_bytes(topic, payload, qos, retain), timeout)

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
        self._sending.send(Outgoing(topic, payload, qos, retain, done))
        await done

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
            self._sending.send(Outgoing(topic, encode(message, self.inbox, self.epoch), qos, True))
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
            self._sending.send(Outgoing(topic, encode(message, self.inbox, self.epoch), qos))
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
        data, items = encode(message, self.inbox, self.epoch), items_of(message)
        return data if items == 1 else Counted(data, items)

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
            outbox, self._outbox = split(outbox, MAX_HELD)
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
            for chunk in chunked(encoded(posted, self.inbox, MAX_PAYLOAD), MAX_PAYLOAD):
                self._send_chunk(topic, qos, chunk)

    def _send_chunk(self, topic: str, qos: int, chunk: list[bytes]) -> None:
        data = chunk[0] if len(chunk) == 1 else encode_batch(chunk, self.inbox)
        self._sending.send(Outgoing(topic, data, qos))

    def reply_error(
        self, reply_to: str | None, message: str, *, code: str = "error", about: str | None = None
    ) -> None:
        """Tell a sender what was wrong with what it sent (if it said where to)."""
        if reply_to and reply_to != self.inbox:
            self.post(reply_to, Error(message=message, code=code, about=about))

    # -- the connection loop --------------------------------------------------------------------
    def _client_for(self, incarnation: str) -> aiomqtt.Client:
        will = None if self._will is None else (*self._will, incarnation)
        return mqtt_client(
            self.broker, self.client_id, will=will, persistent=self.persistent,
            keepalive=self.keepalive,
        )  # fmt: skip

    async def _run(self) -> None:
        reconnects = self._reconnects
        while not self._closing:
            incarnation = uuid.uuid4().hex[:16]
            opened, delay = False, 0.0
            held: asyncio.TimerHandle | None = None
            try:
                async with self._client_for(incarnation) as client:
                    opened = True
                    held = asyncio.get_running_loop().call_later(
                        SHORT, reconnects.held, reconnects.opened()
                    )  # (a connection that lasts is no takeover's: see reconnects)
                    self._client = client
                    self.incarnation = incarnation
                    self._link = link = PahoLink(client, self._sending.acknowledged)
                    for topic, (_, _, qos) in list(self._subs.items()):
                        await mqtt_subscribe(client, topic, qos)
                    self.connections += 1
                    self._connected.set()
                    self._sending.ready(link)
                    reconnects.connected(
                        client_id=self.client_id,
                        incarnation=incarnation,
                        reconnect=self.connections > 1,
                    )
                    for callback in self._on_connect:
                        spawn_guarded(callback(), self._background, self.log)
                    await self._pump(link)
            except BrokerError as e:  # (its CA unreadable: no attempt can succeed)
                self.log.error("bus.refused", broker=str(self.broker), reason=str(e))
                self._attempted.set()
                self._give_up(BusRefused(str(e)))
                break
            except aiomqtt.MqttError as e:
                if self._closing:
                    break
                in_flight = self._sending.oldest_in_flight()
                outcome = reconnects.ended(e, in_flight) if opened else reconnects.failed(e)
                if not opened:
                    self._attempted.set()
                if isinstance(outcome, BusRefused):
                    self._give_up(outcome)
                    break
                delay = outcome
            finally:
                if held is not None:
                    held.cancel()
                self._connected.clear()
                self._client, self._link = None, None
                self._sending.lost()
            await asyncio.sleep(delay)
            allowed = self.may_reconnect
            if allowed is not None and not self._closing and not await allowed():
                self.log.warning("bus.reconnect_forbidden", broker=str(self.broker))
                self._give_up(BusRefused("this party may no longer connect"))
                break

    def _give_up(self, refused: BusRefused) -> None:
        self.refused = refused
        self._gave_up.set()
        self._sending.fail_all(refused)

    def _write_out(self) -> None:
        if self._link is not None:
            self._link.write_out()

    def backlog(self) -> int:
        """Messages received and not yet dispatched."""
        return self._link.queue.qsize() if self._link is not None else 0

    def backlog_ages(self) -> tuple[float, float]:
        """Seconds the oldest message not yet dispatched has waited, and seconds the last
        dispatched one had waited (0, 0 while not connected)."""
        queue = self._link.queue if self._link is not None else None
        if not isinstance(queue, StampedQueue):
            return 0.0, 0.0
        return queue.oldest_age(), queue.last_wait

    async def _pump(self, link: PahoLink) -> None:
        """Dispatch this connection's messages until it ends (then raise MqttError), in a
        task: a handler still waiting at a disconnect (on a `publish`, whose PUBACK comes
        after the reconnect) finishes behind it, and the next connection's messages wait
        for it, in order."""
        before = self._pumping
        pump = asyncio.create_task(self._receive(link, before), name=f"bus-pump-{self.name}")
        self._pumping = pump
        await asyncio.wait({pump, link.disconnected}, return_when=asyncio.FIRST_COMPLETED)
        if pump.done():
            pump.result()  # (a handler's bug ends the bus, as before)
        cause = link.disconnected.exception() if not link.disconnected.cancelled() else None
        raise aiomqtt.MqttError("disconnected") from cause

    async def _receive(self, link: PahoLink, before: asyncio.Task[None] | None) -> None:
        if before is not None:
            await asyncio.wait({before})  # the last connection's messages first
        queue = self._reading = link.queue
        if self._released:  # (released while no pump read: before this connection's)
            queue.put_first(self._released)
            self._released = []
        try:
            await link.receive(self._dispatch)
        except aiomqtt.MqttError:
            pass  # the connection ended: _pump says so
        finally:
            await self._drain(link)
            if self._reading is queue:  # (no await since the drain found it empty)
                self._reading = None

    async def _drain(self, link: PahoLink) -> None:
        """Dispatch what was received (and already acknowledged) before the connection broke.

        aiomqtt stops iterating at a disconnect even when its queue still holds messages;
        the broker considers those delivered, so dropping them would lose them.
        """
        queue = link.queue
        while not queue.empty() and not self._closing:
            await self._dispatch(queue.get_nowait())

    async def _dispatch(self, mqtt_message: aiomqtt.Message | Released) -> None:
        if isinstance(mqtt_message, Released):  # kept for its handler (counted when it came)
            topic, payload = aiomqtt.Topic(mqtt_message.topic), mqtt_message.payload
        else:
            topic = mqtt_message.topic
            if mqtt_message.retain and not announced(topic.value):  # (a call the broker kept)
                self.log.warning("bus.retained_dropped", topic=topic.value)
                return
            arrived = mqtt_message.payload
            if not isinstance(arrived, bytes | bytearray):
                arrived = str(arrived).encode()
            payload = bytes(arrived)
            self.stats["payloads_in"] += 1
        handler, raw_handler = self._handler_for(topic)
        if raw_handler is not None:
            await self._receiver.raw(raw_handler, topic.value, payload)
            return
        if handler is None:  # not subscribed or routed yet: kept for it (or dropped in time)
            self._unheard.hold(topic.value, payload)
            return
        items = decode_many(payload)
        self._in_batch = len(items) > 1
        try:
            await self._receiver.handle_all(topic.value, handler, items)
        finally:
            self._in_batch = False

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


class MqttConnector:
    """Makes a `Bus` to `broker` (see protocol.transport.base.Connector): the default
    transport of a framework driver."""

    def __init__(self, broker: BrokerURL) -> None:
        self.broker = broker

    @property
    def principal(self) -> str | None:
        return self.broker.username

    def __call__(self, *, name: str, inbox: str | None, will: Will | None) -> Bus:
        return Bus(self.broker, name=name, inbox=inbox, will=will)
