"""What the embedded broker changes in amqtt, in one place: three fixes of amqtt 0.12.1's
bugs, made by replacing a private attribute (`Broker._subscriptions`), a method of the
broker object (`stream_connected`) and one of its connection handlers' class
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


def patch(broker: Any) -> None:
    """Fix an amqtt `Broker` made but not yet started."""
    from amqtt.mqtt.protocol.broker_handler import BrokerProtocolHandler

    broker._subscriptions = IteratedOverACopy()
    broker.stream_connected = quiet_on_reset(broker.stream_connected)
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
