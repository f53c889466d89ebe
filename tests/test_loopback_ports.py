"""The servers a test or a local cluster starts get ports no other one is given, and a
server that could not bind its port says so at once, instead of the port's other
listener being taken for it."""

from __future__ import annotations

import asyncio
import socket
import sys
import time

import pytest

from cluster.testing.zookeeper import ZooKeeperServer
from protocol.tooling.brokers import BrokerError, MosquittoBroker
from protocol.tooling.ports import TASK_PORTS, free_port, wait_for_listener

from conftest import need_mosquitto, need_zookeeper


def test_one_process_is_never_given_one_port_twice() -> None:
    spans = [free_port(5) for _ in range(50)]
    ports = [p for base in spans for p in range(base, base + 5)]
    assert len(set(ports)) == len(ports)
    assert all(10_000 <= p < TASK_PORTS for p in ports)  # not where tasks listen


def test_side_by_side_test_processes_pick_from_their_own_slices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    picked = {}
    for worker in ("gw0", "gw1", "gw2"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        picked[worker] = {free_port() for _ in range(30)}
    assert max(picked["gw0"]) < min(picked["gw1"])
    assert max(picked["gw1"]) < min(picked["gw2"])


def squat(port: int) -> socket.socket:
    """A listener that accepts TCP and never answers, as a stray server would."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


async def test_a_broker_whose_port_is_taken_says_so_at_once() -> None:
    need_mosquitto()
    port = free_port()
    with squat(port):
        broker = MosquittoBroker(port)
        began = time.monotonic()
        with pytest.raises(BrokerError, match=f"another process listens on port {port}"):
            await broker.start()
        assert time.monotonic() - began < 5


async def test_a_zookeeper_whose_port_is_taken_says_so() -> None:
    need_zookeeper()
    port = free_port()
    with squat(port):
        zk = ZooKeeperServer(port)
        try:
            with pytest.raises(BrokerError, match=f"port {port}"):
                await zk.start()
        finally:
            await zk.close()


async def test_a_listener_on_another_address_of_the_port_is_no_hindrance() -> None:
    """A server slow to bind 127.0.0.1:PORT, while another process listens on [::1]:PORT
    (a different socket address): waited for, not taken for a clash."""
    port = free_port()
    other = socket.socket(socket.AF_INET6)
    try:
        other.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        other.bind(("::1", port))
        other.listen()
    except OSError:
        other.close()
        pytest.skip("no IPv6 loopback here")
    slow = (
        "import socket, sys, time; time.sleep(0.5); s = socket.socket(); "
        f"s.bind(('127.0.0.1', {port})); s.listen(); sys.stdin.read()"
    )
    with other:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", slow, stdin=asyncio.subprocess.PIPE
        )
        try:
            await wait_for_listener(proc, port)
        finally:
            proc.kill()
            await proc.wait()
