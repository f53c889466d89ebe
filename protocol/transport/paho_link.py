"""The bus's fast path through aiomqtt into paho: the one module that touches their
private parts (`Client._client`, `_queue`, `_disconnected`, paho's callbacks).

Why: aiomqtt's public surface costs a task per message received and two loop turns and
two epoll_ctl calls per packet written. At thousands of messages a second that is most of
a party's time, so the bus publishes through paho directly, hears each PUBACK from paho
beside aiomqtt, writes paho's socket at the end of the loop turn, and takes arrivals from
aiomqtt's queue without a task each.

The versions are pinned in pyproject.toml to those tests/test_paho_link.py was run against,
and importing this module outside them stops with the range to install.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiomqtt
from paho.mqtt.enums import LogLevel, MQTTErrorCode
from paho.mqtt.matcher import MQTTMatcher
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from protocol.extras import require
from protocol.transport.backlog import StampedQueue

require("aiomqtt", "2.5", "2.6")
require("paho-mqtt", "2.2", "2.3")

RECEIVE_TURN = 0.005  # seconds of dispatching a backlog before the loop lets others run
JOIN_MOST = 256 * 1024  # bytes of waiting packets handed to the socket in one write

_PUBLISH, _PUBACK, _DISCONNECT = 0x30, 0x40, 0xE0  # (MQTT packet types, paho's encoding)
# what a PUBACK of its message id alone says (success, no properties), made once: paho
# makes a ReasonCode and a Properties for each (two of each: 11 us of CPU an
# acknowledgement), and nobody reads them (aiomqtt's on_publish takes the id alone)
_SUCCESS = ReasonCode(PacketTypes.PUBACK)
_NO_PROPERTIES = Properties(PacketTypes.PUBACK)  # type: ignore[no-untyped-call]


class _Filters(MQTTMatcher):
    """paho's per-topic callbacks (`message_callback_add`: nobody here adds one), matched
    against each message it reads. With none, a message matches nothing, found without
    paho's walk: a recursive closure and a generator a message (1.9 us), the closure a
    reference cycle of six objects left to the cyclic collector."""

    def __init__(self, root: Any) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # (paho's matcher is untyped)
        self._root = root  # (any filter added before: kept)

    def iter_match(self, topic: str) -> Any:
        root = self._root
        if not root._children and root._content is None:
            return iter(())
        return super().iter_match(topic)  # type: ignore[no-untyped-call]


class PahoLink:
    """One connected aiomqtt client, driven through paho."""

    def __init__(self, client: aiomqtt.Client, on_acknowledged: Callable[[int], None]) -> None:
        self.paho: Any = client._client
        queue = client._queue
        assert isinstance(queue, StampedQueue)  # (mqtt_client's queue_type)
        self.queue: StampedQueue = queue
        self.disconnected: asyncio.Future[None] = client._disconnected
        self.disconnected.add_done_callback(lambda _: queue.wake())
        self.unwritten = False  # handed to paho since the socket was last written
        filtered = getattr(self.paho, "_on_message_filtered", None)  # (a test's fake: none)
        if filtered is not None:
            self.paho._on_message_filtered = _Filters(filtered._root)
        self._watch_acknowledgements(on_acknowledged)
        self._read_plain_acknowledgements()
        self.write, self._write_behind = self._write_promptly()

    def publish(self, topic: str, payload: bytes, qos: int, retain: bool) -> tuple[int, int, bool]:
        """Hand a payload to paho now: (its result code, message id, already published).
        Raises ValueError for a topic or payload MQTT cannot carry."""
        info = self.paho.publish(topic, payload, qos, retain)
        return info.rc, info.mid, info.rc == 0 and info.is_published()

    def write_out(self) -> None:
        """What handling a message sent goes to the socket now, before the next message
        is handled (else it waits for the loop to come round, after that message)."""
        if self.unwritten:
            self.unwritten = False
            self.write()

    def write_behind(self) -> None:
        """What waits (the PUBACK of the message just dispatched) goes to the socket in
        this loop turn's end, behind what the dispatch woke: a handler that runs in a task
        of its own (the master's intake, a driver's callbacks) sends its answer first, and
        the acknowledgement leaves in the same write (see `receive`)."""
        if self.unwritten:
            self._write_behind()

    def _watch_acknowledgements(self, on_acknowledged: Callable[[int], None]) -> None:
        """Learn of each PUBACK from paho, beside aiomqtt (which still hears them)."""
        inner = self.paho.on_publish

        def on_publish(*args: Any) -> None:  # (client, userdata, mid, reason, properties)
            on_acknowledged(args[2])
            if inner is not None:
                inner(*args)

        self.paho.on_publish = on_publish

    def _read_plain_acknowledgements(self) -> None:
        """A PUBACK that holds its message id alone (the broker's answer to nearly every
        message: success, nothing more) is read here, as paho reads it, without its
        decoding's objects (see _SUCCESS); any other goes through paho."""
        paho = self.paho
        handle = paho._handle_pubackcomp  # (paho's own, bound)

        def handle_pubackcomp(cmd: str) -> MQTTErrorCode:
            packet = paho._in_packet["packet"]
            if cmd != "PUBACK" or len(packet) != 2:
                return handle(cmd)  # type: ignore[no-any-return]
            mid = int.from_bytes(packet, "big")
            paho._easy_log(LogLevel.MQTT_LOG_DEBUG, "Received %s (Mid: %d)", cmd, mid)
            with paho._out_message_mutex:
                if mid in paho._out_messages:  # (told once, as paho does)
                    return paho._do_on_publish(mid, _SUCCESS, _NO_PROPERTIES)  # type: ignore[no-any-return]
            return MQTTErrorCode.MQTT_ERR_SUCCESS

        paho._handle_pubackcomp = handle_pubackcomp

    def _write_promptly(self) -> tuple[Callable[[], None], Callable[[], None]]:
        """Write what paho queues at the end of this loop turn, or sooner (`write_out`),
        rather than as aiomqtt does: it registers the socket for writing through the
        self-pipe, and the write comes two turns later, after two epoll_ctl calls per
        packet. The socket is watched for writability only when the kernel took less
        than all of it. (The write, and what puts the end-of-turn write behind the
        callbacks ready now: `write_behind`.)"""
        paho, loop, disconnected = self.paho, asyncio.get_running_loop(), self.disconnected
        soon: asyncio.Handle | None = None
        fd = -1

        def write() -> None:
            nonlocal soon
            if soon is not None:
                soon.cancel()
                soon = None
            self.unwritten = False
            try:
                join_waiting(paho._out_packet)
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
            self.unwritten = True
            if soon is None:
                soon = loop.call_soon(write)

        def behind() -> None:
            nonlocal soon
            if soon is not None:
                soon.cancel()
            soon = loop.call_soon(write)

        paho.on_socket_register_write = register
        return write, behind

    async def receive(self, dispatch: Callable[[aiomqtt.Message], Awaitable[None]]) -> None:
        """Dispatch arriving messages until the connection ends (then raise MqttError).

        aiomqtt's iterator makes a task for every message; we take them from its queue
        directly, which matters at thousands of messages a second, and an empty queue
        wakes us in the loop's next turn once something arrives or the connection ends
        (`StampedQueue.arrival`): a message to a party at rest is dispatched a turn after
        it is read, not three.

        What a dispatch sent goes to the socket before the next message is dispatched.
        The last of a backlog's (a party at rest: one message, say) is acknowledged
        behind what its dispatch woke (`write_behind`): where the handler is a task of
        its own, its answer is sent first and the PUBACK with it, in one write, where
        the PUBACK's own write went first, woke the broker, and cost the answer some 50
        to 80 us of a cold process (benchmarks.e2e's one task at a time: three such
        writes on the way from offer to RUNNING).
        """
        queue, disconnected = self.queue, self.disconnected
        loop = asyncio.get_running_loop()
        turn_ends = loop.time() + RECEIVE_TURN
        while True:
            if not queue.empty():
                await dispatch(queue.get_nowait())
                if queue.empty():
                    self.write_behind()
                else:
                    self.write_out()
                if loop.time() > turn_ends:  # a backlog (a flood) must not starve the rest
                    await asyncio.sleep(0)
                    turn_ends = loop.time() + RECEIVE_TURN
                continue
            if disconnected.done():
                cause = disconnected.exception() if not disconnected.cancelled() else None
                raise aiomqtt.MqttError("disconnected") from cause
            await queue.arrival()
            turn_ends = loop.time() + RECEIVE_TURN


def join_waiting(packets: Any) -> None:
    """Join runs of the packets paho has waiting (its `_out_packet` deque) into one each,
    so that they go to the socket in one write: paho writes each packet with a `send` of
    its own, and over TLS each is a record of its own and a system call (the PUBACKs of a
    burst read, a turn's publishes). Joined are only packets not begun and that paho does
    nothing with once written (a QoS 0 PUBLISH is marked published then, a DISCONNECT
    closes): a QoS 1 PUBLISH is done at its PUBACK, whatever bytes carried it."""
    if len(packets) < 2:
        return
    out: list[Any] = []
    run: list[Any] = []
    size = 0

    def close_run() -> None:
        if len(run) == 1:
            out.append(run[0])
        elif run:
            data = b"".join(p["packet"] for p in run)
            out.append(
                {"command": _PUBACK, "mid": 0, "qos": 1, "pos": 0, "to_process": len(data),
                 "packet": data, "info": None}
            )  # fmt: skip

    for packet in packets:
        kind = packet["command"] & 0xF0
        plain = packet["pos"] == 0 and kind != _DISCONNECT
        if plain and kind == _PUBLISH and packet["qos"] == 0:
            plain = False
        if not plain or size + packet["to_process"] > JOIN_MOST:
            close_run()
            run, size = [], 0
        if plain:
            run.append(packet)
            size += packet["to_process"]
        else:
            out.append(packet)
    close_run()
    if len(out) < len(packets):
        packets.clear()
        packets.extend(out)
