"""What the embedded broker changes in amqtt, in one place: six fixes of amqtt 0.12.1's
bugs, made by replacing a private attribute (`Broker._subscriptions`), methods of the
broker object (`stream_connected`; `_authenticate`, `_delete_session` and
`_client_message_loop`; `_publish_session_retained_messages`;
`_publish_retained_messages_for_subscription`) and one of its connection handlers' class
(`BrokerProtocolHandler.stop`).

The version is pinned in pyproject.toml to the one tests/test_adapters.py was run against;
importing this module outside it stops with the range to install.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from protocol import logs
from protocol.extras import require
from protocol.transport.aio import first_of

require("amqtt", "0.12.1", "0.13")

log = logs.get("broker")
Stop = Callable[[Any], Awaitable[None]]  # a connection handler's stop
TAKEOVER_WAIT = 5.0  # seconds a connection taken over has to end before it is stopped


def patch(broker: Any) -> None:
    """Fix an amqtt `Broker` made but not yet started."""
    from amqtt.mqtt.protocol.broker_handler import BrokerProtocolHandler

    broker._subscriptions = IteratedOverACopy()
    broker.stream_connected = quiet_on_reset(broker.stream_connected)
    OneConnectionPerClientId(broker)
    broker._publish_session_retained_messages = queued_as_published(broker)
    broker._publish_retained_messages_for_subscription = retained_for_its_own(broker)
    if not hasattr(BrokerProtocolHandler.stop, "stops_its_reader"):
        BrokerProtocolHandler.stop = reader_stopped_first(BrokerProtocolHandler.stop)


class IteratedOverACopy(dict[str, Any]):
    """amqtt's table of subscriptions, iterated over a copy of its keys.

    amqtt 0.12.1 awaits while it walks the table (`Broker._run_broadcast`: the topic
    plugin for each subscriber; a returning session's retained messages), so a client
    that subscribes meanwhile makes the walk raise "dictionary changed size during
    iteration" and the message is delivered to none of the subscriptions after that
    point: a QoS 1 message acknowledged to its sender and lost. It came twice in a
    demo run, and lost 15 of 300 messages while 40 clients subscribed (test_bus).
    """

    def __iter__(self) -> Iterator[str]:
        return iter(list(super().__iter__()))

    def items(self) -> Any:
        return list(super().items())


def quiet_on_reset(serve: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    """amqtt's handler for one client connection, for whom a client that resets its
    connection is ordinary: a killed party, a client refused at CONNECT over TLS.

    amqtt 0.12.1 lets the `ConnectionResetError` of closing such a connection escape its
    handler, and asyncio logs it as an unhandled error with a traceback, once per client
    (a burst in every demo where a party is killed). The session is over either way.
    """

    async def serve_quietly(*args: Any, **kwargs: Any) -> None:
        try:
            await serve(*args, **kwargs)
        except ConnectionError as e:
            log.debug("broker.client_reset", kind="embedded", error=str(e))

    return serve_quietly


def queued_as_published(broker: Any) -> Callable[[Any], Awaitable[None]]:
    """What the broker sends a persistent session that comes back: the QoS 1 messages
    queued for it while it was away, each without the RETAIN flag, as they were published
    ([MQTT-3.3.1-9]; mosquitto's).

    amqtt 0.12.1 sent them with RETAIN set, as if retained; the bus reads a retained
    message only on the master's announcements, so a master restarted on the embedded
    broker dropped everything its slaves and frameworks had sent meanwhile
    (`bus.retained_dropped`, 45 warnings for one slave's topic in the sharing tutorial).
    """

    async def publish_queued(session: Any) -> None:
        handler = broker._get_handler(session)
        if handler is None:
            return
        sending = []
        while not session.retained_messages.empty():
            queued = session.retained_messages.get_nowait()
            publish = handler.mqtt_publish(queued.topic, queued.data, queued.qos, retain=False)
            sending.append(asyncio.ensure_future(publish))
        if sending:
            await asyncio.wait(sending)

    return publish_queued


def retained_for_its_own(broker: Any) -> Callable[[tuple[str, int], Any], Awaitable[None]]:
    """The retained messages a subscription is sent: only a subscription the session
    itself holds, that its principal may still read.

    amqtt 0.12.1 sends every client that connects the retained messages of every topic
    filter in the broker's subscription table (`stream_connected`), whoever holds it,
    straight to the connection, past the topic-check plugin: with an operator's
    `drfmesos view` open (subscribed to `<p>/state`), any tenant that connected was
    handed the master's retained state, every tenant's tasks and offers (attack89).
    mosquitto sends a connection what its own subscriptions match.
    """
    from amqtt.contexts import Action

    send = broker._publish_retained_messages_for_subscription

    async def publish_retained(subscription: tuple[str, int], session: Any) -> None:
        topic_filter = subscription[0]
        held = [q for s, q in broker._subscriptions.get(topic_filter, ()) if s is session]
        if not held:
            return  # (another's subscription, or one refused)
        if not await broker._topic_filtering(session, topic_filter, Action.SUBSCRIBE):
            return  # (its secret was replaced since, or its principal removed)
        await send((topic_filter, held[0]), session)

    return publish_retained


def reader_stopped_first(stop: Stop) -> Stop:
    """A connection handler's `stop`, which first stops the connection's reader for good.

    amqtt 0.12.1 cancels the reader once and waits for it to say it stopped. The reader
    waits for each packet in a Python 3.11 `asyncio.wait_for`, which loses a cancel that
    comes in the turn a packet does (see `protocol.transport.aio.within`): the reader read
    on, never said it stopped, and the broker's shutdown hung on it and never closed its
    port (a restarted embedded broker could not listen again). Cancelled again while it
    has not stopped, it does.
    """

    async def stop_reader_then(handler: Any) -> None:
        reader: asyncio.Task[None] | None = handler._reader_task
        stopped: asyncio.Event = handler._reader_stopped
        if reader is not None and reader is not asyncio.current_task():
            while not reader.done() and not stopped.is_set():
                reader.cancel()
                await first_of(stopped, timeout=0.1)
        await stop(handler)

    stop_reader_then.stops_its_reader = True  # type: ignore[attr-defined]
    return stop_reader_then


class OneConnectionPerClientId:
    """A client whose client id is connected already takes that connection over, as MQTT
    3.1.1 requires ([MQTT-3.1.4-2]) and mosquitto does: once it has authenticated, the
    broker closes the other connection (its Last Will goes, as for any connection that
    ends without a DISCONNECT) and waits for it to end before it goes on.

    amqtt 0.12.1 instead deleted the session of a clean-session CONNECT's client id before
    authenticating it and left the connection open: the connection was deaf from then on
    and never told (two processes with one principal: the first heard nothing more), and
    anybody who reached the port could deafen any principal with a CONNECT in its name
    and a wrong secret. Here a live connection's session is deleted only for a client
    that authenticated as it; and the other closed, its client sees the takeover (see
    protocol.transport.reconnects). A persistent session taken over is handed on whole.
    """

    def __init__(self, broker: Any) -> None:
        self._live: dict[str, tuple[Any, asyncio.Event]] = {}  # client id: handler, ended
        self._delete_session = broker._delete_session
        self._authenticate = broker._authenticate
        self._message_loop = broker._client_message_loop
        broker._delete_session = self.delete_session
        broker._authenticate = self.authenticate
        broker._client_message_loop = self.message_loop

    async def delete_session(self, client_id: str) -> None:
        if client_id not in self._live:  # (a live one's: after its taker authenticated)
            await self._delete_session(client_id)

    async def authenticate(self, session: Any, listener: Any) -> bool:
        allowed: bool = await self._authenticate(session, listener)
        live = self._live.get(session.client_id) if allowed else None
        if live is not None:
            handler, ended = live
            log.debug("broker.taken_over", kind="embedded", client_id=session.client_id)
            await handler.handle_connection_closed()  # (the loop's disconnect: it ends)
            await first_of(ended, timeout=TAKEOVER_WAIT)
            if not ended.is_set():
                await handler.stop()
            if session.clean_session:
                await self._delete_session(session.client_id)
        return allowed

    async def message_loop(self, session: Any, handler: Any) -> None:
        ended = asyncio.Event()
        client_id = session.client_id
        self._live[client_id] = (handler, ended)
        try:
            await self._message_loop(session, handler)
        finally:
            ended.set()
            if self._live.get(client_id, (None,))[0] is handler:
                del self._live[client_id]
