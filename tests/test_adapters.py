"""The two places drfmesos reaches into libraries' private parts (paho_link for aiomqtt and
paho, amqtt_patches for amqtt): each fails here, loudly, if a release renames or changes
what it uses, and importing either outside the tested versions stops with the range."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib.metadata
from collections import deque
from types import SimpleNamespace
from typing import Any, cast

import aiomqtt
import pytest

from protocol.extras import UntestedVersion, require
from protocol.tooling.amqtt_patches import IteratedOverACopy, patch
from protocol.tooling.brokers import BrokerURL, EmbeddedBroker
from protocol.transport.aio import within
from protocol.transport.backlog import StampedQueue
from protocol.transport.mqtt_client import mqtt_client
from protocol.transport.paho_link import PahoLink

from harness.helpers import eventually


def test_a_version_outside_the_tested_range_stops_the_import_saying_which_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(importlib.metadata, "version", lambda dist: "2.6.0")
    with pytest.raises(UntestedVersion, match=r"aiomqtt>=2\.5,<2\.6.*2\.6\.0 is installed"):
        require("aiomqtt", "2.5", "2.6")
    monkeypatch.setattr(importlib.metadata, "version", lambda dist: "2.4.9")
    with pytest.raises(UntestedVersion):
        require("aiomqtt", "2.5", "2.6")
    monkeypatch.setattr(importlib.metadata, "version", lambda dist: "2.5.1")
    require("aiomqtt", "2.5", "2.6")


def test_the_installed_versions_are_the_tested_ones() -> None:
    require("aiomqtt", "2.5", "2.6")
    require("paho-mqtt", "2.2", "2.3")
    require("amqtt", "0.12.1", "0.13")


async def test_aiomqtts_private_parts_are_there_and_the_fast_path_publishes_and_receives(
    embedded: EmbeddedBroker,
) -> None:
    acknowledged: list[int] = []
    url = embedded.url
    # (StampedQueue: the bus's queue_type, so the link meets the queue it meets in the bus)
    async with aiomqtt.Client(url.host, url.port, queue_type=StampedQueue) as client:
        assert isinstance(client._queue, StampedQueue)
        assert isinstance(client._disconnected, asyncio.Future)
        for name in ("publish", "loop_write", "want_write", "socket"):
            assert callable(getattr(client._client, name)), name
        # (the PUBACK fast path: paho's handler it stands in front of, and what it reads)
        for name in ("_handle_pubackcomp", "_do_on_publish", "_easy_log"):
            assert callable(getattr(client._client, name)), name
        for name in ("_in_packet", "_out_messages", "_out_message_mutex"):
            assert hasattr(client._client, name), name
        # (the matcher of per-topic callbacks the link stands in for, and what it reads)
        root = client._client._on_message_filtered._root
        assert isinstance(root._children, dict)
        assert hasattr(root, "_content")
        link = PahoLink(client, acknowledged.append)
        await client.subscribe("adapter/#", qos=1)

        rc, mid, _ = link.publish("adapter/x", b"one", 1, False)
        assert rc == 0
        link.write_out()  # (written at once, not when the loop comes round)
        received: list[aiomqtt.Message] = []

        async def take(message: aiomqtt.Message) -> None:
            received.append(message)
            raise asyncio.CancelledError  # one is enough: end receive()

        with pytest.raises(asyncio.CancelledError):
            await within(link.receive(take), 10)
        assert received[0].payload == b"one"
        assert received[0].topic.value == "adapter/x"
        await eventually(lambda: mid in acknowledged)  # the PUBACK, through paho's callback
        with pytest.raises(ValueError, match="wildcard"):  # what MQTT cannot carry: the call
            link.publish("adapter/+", b"", 1, False)


async def test_a_message_read_matches_no_topic_callback_without_leaving_a_cycle(
    embedded: EmbeddedBroker,
) -> None:
    """paho matches each message it reads against its per-topic callbacks; with none
    (as ever here) the link's matcher finds nothing without paho's walk, whose recursive
    closure left a reference cycle a message for the collector. One added is matched."""
    url = embedded.url
    async with aiomqtt.Client(url.host, url.port, queue_type=StampedQueue) as client:
        PahoLink(client, lambda _: None)
        matcher: Any = client._client._on_message_filtered
        gc.collect()
        for _ in range(100):
            assert list(matcher.iter_match("filters/x")) == []
        assert gc.collect() == 0  # nothing left for the collector

        def on_filtered(*_: object) -> None:
            return None

        client._client.message_callback_add("filters/+", on_filtered)
        assert list(matcher.iter_match("filters/x")) == [on_filtered]
        assert list(matcher.iter_match("other/x")) == []


async def test_what_paho_has_waiting_goes_out_in_one_write_each_message_in_order(
    embedded: EmbeddedBroker,
) -> None:
    """Paho writes each packet with a send of its own (over TLS a record and a system call
    each); the link joins those waiting into one write, and every QoS 1 message is still
    acknowledged and a QoS 0 one marked published."""
    acknowledged: list[int] = []
    url = embedded.url
    async with aiomqtt.Client(url.host, url.port, queue_type=StampedQueue) as client:
        link = PahoLink(client, acknowledged.append)
        await client.subscribe("joined/#", qos=1)
        sends: list[int] = []
        send = client._client._sock_send
        client._client._sock_send = lambda data: sends.append(len(data)) or send(data)
        mids = []
        for i in range(12):  # (within paho's 20 in flight: the rest would wait in paho)
            rc, mid, _ = link.publish("joined/x", str(i).encode(), 0 if i == 6 else 1, False)
            assert rc == 0
            mids.append(mid)
        assert len(client._client._out_packet) == 12
        link.write_out()
        assert len(sends) == 3  # 0-5, the QoS 0 message, 7-11
        received: list[bytes] = []

        async def take(message: aiomqtt.Message) -> None:
            assert isinstance(message.payload, bytes)
            received.append(message.payload)
            if len(received) == 12:
                raise asyncio.CancelledError

        with pytest.raises(asyncio.CancelledError):
            await within(link.receive(take), 10)
        assert received == [str(i).encode() for i in range(12)]
        qos1 = [m for i, m in enumerate(mids) if i != 6]
        await eventually(lambda: set(qos1) <= set(acknowledged))


async def test_a_message_to_a_party_at_rest_is_dispatched_in_the_loops_next_turn() -> None:
    """A party waiting for its next message takes it a turn after it is read, not three
    (every hop of a lone task wakes a party at rest); the connection's end wakes it too."""
    queue: StampedQueue = StampedQueue()
    disconnected: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    paho = SimpleNamespace(on_publish=None, _handle_pubackcomp=None)  # (what PahoLink wraps)
    link = PahoLink(
        cast(
            aiomqtt.Client, SimpleNamespace(_client=paho, _queue=queue, _disconnected=disconnected)
        ),
        lambda mid: None,
    )
    taken: list[str] = []

    async def take(message: aiomqtt.Message) -> None:
        taken.append(cast(str, message))

    receiving = asyncio.create_task(link.receive(take))
    for _ in range(5):  # at rest, waiting
        await asyncio.sleep(0)
    queue.put_nowait("one")  # (as paho's read of the socket puts it)
    await asyncio.sleep(0)
    assert taken == ["one"]
    queue.put_nowait("two")
    await asyncio.sleep(0)
    assert taken == ["one", "two"]
    disconnected.set_result(None)
    with pytest.raises(aiomqtt.MqttError):
        await within(receiving, 10)


def _packet(command: int, data: bytes) -> dict[str, object]:
    """A packet as paho keeps it waiting (its `_out_packet`), not begun."""
    return {"command": command, "mid": 0, "qos": 1, "pos": 0, "to_process": len(data),
            "packet": data, "info": None}  # fmt: skip


async def test_a_lone_message_is_acknowledged_in_the_write_of_its_handlers_answer() -> None:
    """A party at rest whose handler runs in a task of its own (the master's intake, a
    driver's callbacks) sends that handler's answer first, and the PUBACK in the same
    write: the PUBACK's own write went first, woke the broker, and the answer waited. A
    message with more behind it has its PUBACK written before the next is dispatched."""
    queue: StampedQueue = StampedQueue()
    disconnected: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiting: deque[dict[str, object]] = deque()
    writes: list[list[object]] = []

    def loop_write() -> None:  # (paho's: what waits goes to the socket)
        writes.append([p["packet"] for p in waiting])
        waiting.clear()

    paho = SimpleNamespace(
        on_publish=None, _handle_pubackcomp=None, _out_packet=waiting, loop_write=loop_write,
        want_write=lambda: False, socket=lambda: None,
    )  # fmt: skip
    link = PahoLink(
        cast(
            aiomqtt.Client, SimpleNamespace(_client=paho, _queue=queue, _disconnected=disconnected)
        ),
        lambda mid: None,
    )
    sock = SimpleNamespace(fileno=lambda: -1)

    def paho_queues(data: bytes, command: int) -> None:  # (and asks for a write, as paho does)
        waiting.append(_packet(command, data))
        paho.on_socket_register_write(None, None, sock)

    calls: asyncio.Queue[str] = asyncio.Queue()

    async def handler() -> None:  # in a task of its own: answers each call, at once
        while True:
            call = await calls.get()
            paho_queues(b"answer-" + call.encode(), 0x32)
            link.write_out()  # (as the bus's first post of a turn)

    async def take(message: aiomqtt.Message) -> None:
        calls.put_nowait(cast(str, message))

    handling = asyncio.create_task(handler())
    receiving = asyncio.create_task(link.receive(take))
    for _ in range(5):  # at rest, waiting
        await asyncio.sleep(0)
    queue.put_nowait("1")  # (as paho's read of the socket: the message, then its PUBACK)
    paho_queues(b"puback-1", 0x40)
    await eventually(lambda: bool(writes))
    for _ in range(5):
        await asyncio.sleep(0)
    assert writes == [[b"puback-1answer-1"]]  # one write: the answer, its PUBACK with it

    writes.clear()  # two read at once: the first's PUBACK goes before the second's turn
    for n in ("2", "3"):
        queue.put_nowait(n)
        paho_queues(b"puback-" + n.encode(), 0x40)
    await eventually(lambda: len(writes) >= 2)
    for _ in range(5):
        await asyncio.sleep(0)
    assert writes[0] == [b"puback-2puback-3"]  # (both were waiting when the first was taken)
    assert writes[1:] == [[b"answer-2answer-3"]] or writes[1:] == [[b"answer-2"], [b"answer-3"]]
    disconnected.set_result(None)
    with pytest.raises(aiomqtt.MqttError):
        await within(receiving, 10)
    handling.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await handling


async def test_amqtts_patched_parts_are_there() -> None:
    from amqtt.broker import Broker
    from amqtt.mqtt.protocol.broker_handler import BrokerProtocolHandler

    anonymous = {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}}
    listeners = {"default": {"type": "tcp", "bind": "127.0.0.1:0"}}
    # (its plugins as EmbeddedBroker's: amqtt's defaults add $SYS, which warns of psutil)
    broker = Broker({"listeners": listeners, "plugins": anonymous})
    assert isinstance(broker._subscriptions, dict)
    original = broker.stream_connected
    assert callable(original)
    patch(broker)
    assert isinstance(broker._subscriptions, IteratedOverACopy)
    assert broker.stream_connected is not original
    # what the handler's patched stop reads: its reader's task and its "stopped" event
    handler = BrokerProtocolHandler(broker.plugins_manager)
    assert handler._reader_task is None
    assert isinstance(handler._reader_stopped, asyncio.Event)
    assert getattr(BrokerProtocolHandler.stop, "stops_its_reader", False)
    table = IteratedOverACopy(a=1)
    for key in table:  # changed while it is walked: the walk goes on, over a copy
        table[key + "x"] = 2
    assert set(table) == {"a", "ax"}


async def test_a_disconnect_after_a_cancelled_connect_leaves_nothing_for_the_loop() -> None:
    """aiomqtt's disconnect callback read the cancelled connect's outcome and raised in
    the loop (a bus closed while connecting); ours returns (the conftest fixture fails a
    test on any error only the loop saw)."""
    client = mqtt_client(BrokerURL("127.0.0.1", 1), "c", will=None, persistent=False, keepalive=5)
    assert isinstance(client._connected, asyncio.Future)
    client._connected.cancel()
    client._client.on_disconnect(client._client, None, None, 7, None)  # (as paho calls it)
    assert not client._disconnected.done()
