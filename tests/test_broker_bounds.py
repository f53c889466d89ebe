"""What a real mosquitto holds for one client (brokers.QueueBounds), and what a client the
bounds touch learns: a subscriber that never reads costs the broker its bound, not its
topics' traffic, and the others on those topics get everything."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import aiomqtt
import pytest

from protocol.tooling.brokers import BrokerError, MosquittoBroker, QueueBounds
from protocol.transport.aio import within

from conftest import need_mosquitto

PAYLOAD = 256 * 1024
SENT = 1024  # 256 MiB for the subscriber that never reads


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _mqtt_string(text: str) -> bytes:
    return len(text).to_bytes(2, "big") + text.encode()


async def subscriber_that_never_reads(port: int, topic: str, qos: int = 1) -> socket.socket:
    """A raw MQTT 3.1.1 client with a tiny receive buffer: it connects, subscribes at
    QoS 1 and then reads nothing, ever (as a hostile tenant's client may)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", port))
    body = _mqtt_string("MQTT") + bytes([4, 0x02]) + (60).to_bytes(2, "big")
    body += _mqtt_string("never-reads")
    await loop.sock_sendall(sock, bytes([0x10, len(body)]) + body)
    assert await loop.sock_recv(sock, 4) == b"\x20\x02\x00\x00"  # CONNACK, accepted
    body = (1).to_bytes(2, "big") + _mqtt_string(topic) + bytes([qos])
    await loop.sock_sendall(sock, bytes([0x82, len(body)]) + body)
    assert await loop.sock_recv(sock, 5) == b"\x90\x03\x00\x01" + bytes([qos])  # SUBACK
    return sock


async def flood_beside_a_reader(broker: MosquittoBroker, qos: int = 1) -> tuple[float, int]:
    """256 MiB of messages (at `qos`) on a topic a never-reading client and a reading one
    both subscribe to: how much the broker grew (MiB), and how many the reader got."""
    assert broker.pid is not None
    port = broker.url.port
    stuck = await subscriber_that_never_reads(port, "flood/#", qos)
    got = 0
    try:
        async with aiomqtt.Client("127.0.0.1", port, identifier="reader") as reader:
            await reader.subscribe("flood/#", qos=qos)

            async def read() -> None:
                nonlocal got
                async for _ in reader.messages:
                    got += 1
                    if got == SENT:
                        return

            reading = asyncio.create_task(read())
            before = rss_mib(broker.pid)
            payload = os.urandom(PAYLOAD)
            async with aiomqtt.Client("127.0.0.1", port, identifier="flooder") as tx:
                for _ in range(SENT):  # each acknowledged by the broker
                    await tx.publish("flood/x", payload, qos=qos)
            await within(reading, 60)
            return rss_mib(broker.pid) - before, got
    finally:
        stuck.close()


async def test_a_subscriber_that_never_reads_costs_the_broker_its_bound_and_others_get_all(
    mosquitto: MosquittoBroker,
) -> None:
    """The default bounds (48 MiB of payload in flight and queued for one client): the
    broker grew by about 100 MiB for a client owed 256 MiB (by all 256 MiB before, with
    max_queued_messages 0), and a reader on the same topic got every message."""
    grown, got = await flood_beside_a_reader(mosquitto)
    assert got == SENT
    assert grown < 128, f"the broker grew by {grown:.0f} MiB for one client"


async def test_tighter_bounds_hold_the_broker_tighter() -> None:
    """The bound is what it says: 4 MiB in flight and 4 MiB queued grew it by under 32."""
    need_mosquitto()
    broker = MosquittoBroker(bounds=QueueBounds(inflight_bytes=4 << 20, queued_bytes=4 << 20))
    await broker.start()
    try:
        grown, got = await flood_beside_a_reader(broker)
    finally:
        await broker.stop()
        broker.cleanup()
    assert got == SENT
    assert grown < 32, f"the broker grew by {grown:.0f} MiB for one client"


async def test_at_qos_0_the_bound_is_a_count_of_messages() -> None:
    """mosquitto 2.0 holds QoS 0 messages for a client as packets, bounded by their count
    alone: 100 of 256 KiB grew it by about 26 MiB (by 254 with the default 100,000)."""
    need_mosquitto()
    broker = MosquittoBroker(bounds=QueueBounds(queued_messages=100))
    await broker.start()
    try:
        grown, got = await flood_beside_a_reader(broker, qos=0)
    finally:
        await broker.stop()
        broker.cleanup()
    assert got == SENT
    assert grown < 64, f"the broker grew by {grown:.0f} MiB for one client"


def test_no_bound_may_be_zero() -> None:
    """0 is "no maximum" to mosquitto (and a disconnect after every dropped publish)."""
    with pytest.raises(BrokerError, match="positive"):
        QueueBounds(queued_messages=0)


def test_the_docker_brokers_config_has_the_same_bounds() -> None:
    compose = (Path(__file__).parent.parent / "docker" / "mosquitto.conf").read_text()
    lines = {line for line in compose.splitlines() if not line.startswith("#")}
    assert set(QueueBounds().conf.splitlines()) <= lines
    assert "autosave_interval 1" in lines  # (10 s broke the chaos soak: see brokers.py)
