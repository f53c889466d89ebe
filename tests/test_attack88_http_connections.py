"""Connections that never finish a request hold nothing of anybody else's (attack88).

Anyone who reaches the master's HTTP port, credentials or none, could open connections
and send half a request head each (slowloris): aiohttp keeps such a connection an hour.
1,100 of them from one address took every file the master may open (a soft limit of
1,024, systemd's default): the operator's page, Mesos HTTP frameworks and every other
client got no answer, and the master logged an asyncio traceback every second
(`socket.accept() out of system resource`). Now one client address holds at most
CONNECTIONS_PER_ADDRESS of them, and all together leave the master FILES_KEPT of its
open-file limit: past either, a new connection is closed at once, with a line in the log.

The attacker runs in a process of its own (its sockets are its own files), from
127.0.0.2; the operator asks from 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import ssl
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest

from cluster.local.secure import provision
from master.http import connections
from master.http.config import HttpConfig
from master.http.connections import CONNECTIONS_PER_ADDRESS, client_of
from master.master import Master, MasterConfig
from protocol.transport.aio import within
from protocol.transport.memory import MemoryBroker
from protocol.wire.topics import Topics

from harness.helpers import basic, eventually, open_transport

PRINCIPALS = [("master", "master"), ("ops", "operator"), ("alice", "framework")]
HALF_HEADS = 1_100
SOFT_LIMIT = 1_024  # systemd's default soft RLIMIT_NOFILE for a service

pytestmark = pytest.mark.timeout(90)

ATTACKER = textwrap.dedent(
    """
    import resource, select, socket, sys, time
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    host, port, count, tls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    held = []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.2", 0))
        s.settimeout(5)
        try:
            s.connect((host, port))
            if tls == "http":  # (over HTTPS: not even a TLS hello)
                s.sendall(b"GET /api/v1/state HTTP/1.1\\r\\nHost: x\\r\\n")
        except OSError:  # (closed by the master before the head went)
            pass
        held.append(s)
    time.sleep(2)
    # a connection the master closed reads as its end
    poll = select.poll()
    for s in held:
        poll.register(s, select.POLLIN)
    ready = {fd for fd, _ in poll.poll(0)}
    def ended(s):
        try:
            return not s.recv(1)
        except OSError:  # (reset)
            return True

    closed = [s for s in held if s.fileno() in ready and ended(s)]
    print(len(held), len(held) - len(closed), flush=True)
    sys.stdin.read()  # (holds them until told)
    """
)


@pytest.fixture
def soft_file_limit(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process (the master's) may open SOFT_LIMIT files, and no more (a container's
    hard limit: the master lifts its soft limit to the hard one as it starts)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(SOFT_LIMIT, hard), hard))
    monkeypatch.setattr(
        connections, "lift_file_limit", lambda: resource.getrlimit(resource.RLIMIT_NOFILE)
    )
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_half_sent_requests_leave_the_operator_answered(
    tmp_path: Path, soft_file_limit: None, scheme: str
) -> None:
    store = provision(tmp_path / "auth", PRINCIPALS)
    http = HttpConfig(port=0, credentials=store.path)
    if scheme == "https":  # (the store's certificate: 127.0.0.1 is in it)
        http = replace(http, cert=store.path / "broker.pem", key=store.path / "broker.key")
    async with contextlib.AsyncExitStack() as stack:
        broker = MemoryBroker(store.principals.values())
        config = MasterConfig(
            principals=store.principals_file,
            http=http,
        )
        bus = await open_transport(stack, broker.connector("master"), "master")
        master = Master(bus, Topics("attack88http"), config)
        await master.start()
        stack.push_async_callback(master.stop)
        await eventually(lambda: bool(master.web_ui))
        where = urlsplit(master.web_ui)
        attacker = await asyncio.create_subprocess_exec(
            sys.executable, "-c", ATTACKER,
            str(where.hostname), str(where.port), str(HALF_HEADS), scheme,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )  # fmt: skip

        async def stop_attacker() -> None:
            assert attacker.stdin is not None
            attacker.stdin.close()
            with contextlib.suppress(TimeoutError):
                await within(attacker.wait(), 10)
            if attacker.returncode is None:
                attacker.kill()
                await attacker.wait()

        stack.push_async_callback(stop_attacker)
        assert attacker.stdout is not None
        line = await within(attacker.stdout.readline(), 60)
        opened, still_open = map(int, line.split())
        assert opened == HALF_HEADS  # (each was taken, and answered or closed at once)
        assert still_open <= CONNECTIONS_PER_ADDRESS

        trust = ssl.create_default_context(cafile=store.path / "ca.pem")
        right = {"Authorization": basic("ops", store.secret_file("ops").read_text().strip())}
        async with (
            aiohttp.ClientSession(headers=right, timeout=aiohttp.ClientTimeout(total=5)) as ops,
            ops.get(f"{master.web_ui}api/v1/whoami", ssl=trust) as r,
        ):
            assert r.status == 200
            assert (await r.json())["principal"] == "ops"


def test_a_client_is_an_ipv4_address_or_an_ipv6_slash_64() -> None:
    """An IPv6 host is given a /64: counted by address, it would hold 2**64 bounds."""
    assert client_of("192.0.2.7") == "192.0.2.7"
    assert client_of("::ffff:192.0.2.7") == "192.0.2.7"
    assert client_of("2001:db8:1:2::5") == client_of("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert client_of("2001:db8:1:3::5") != client_of("2001:db8:1:2::5")
    assert client_of("fe80::1%eth0") == "fe80::/64"
    assert client_of("/run/x.sock") == "/run/x.sock"  # (not an address: itself)
