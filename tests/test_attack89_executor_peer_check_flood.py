"""A neighbour's calls without a token do not hold the executor's own ones (attack89).

A Mesos executor's adapter (frameworks.mesos_executor) serves a call with no token only
from a socket of its own user (pymesos sends none), and told it by reading the whole of
/proc/net/tcp and tcp6, in a thread, for every such call: some 15 ms a read on a host of
a few thousand connections, all of it Python holding the interpreter lock. Another
tenant's task (another user), sending token-less calls from 400 connections at once,
queued read after read ahead of the executor's own pymesos calls, which waited seconds
for theirs (and the adapter's loop with them). Now the kernel is asked about the one
socket (sock_diag), some 20 us.

The neighbour runs as user nobody; the executor's own client as this test's user.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import urllib.request
from types import SimpleNamespace
from typing import Any

import pytest

from frameworks.mesos_executor import MesosExecutorAdapter
from protocol.tooling.peer_uid import peer_is_own_user

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.skipif(os.geteuid() != 0, reason="the neighbour runs as another user"),
]

FLOOD_SECONDS = 15
AT_ONCE = 400
IDLE = 2_000  # connections the neighbour holds open besides (two sockets each)
NOBODY = 65534

FLOOD = f"""
import resource, selectors, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
host, port = sys.argv[1].split(":")
seconds, at_once = float(sys.argv[2]), int(sys.argv[3])
idle = socket.create_server(("127.0.0.1", 0), backlog=4096)
held = []  # (the host's table of connections, longer: each read of it longer too)
for _ in range({IDLE}):
    held.append(socket.create_connection(idle.getsockname()))
    held.append(idle.accept()[0])
request = (b"POST /api/v1/executor HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\n"
           b"Content-Length: 2\\r\\n\\r\\n{{}}")
poll = selectors.DefaultSelector()
def ask():
    s = socket.create_connection((host, int(port)), timeout=10)
    s.setblocking(False)
    s.send(request)
    poll.register(s, selectors.EVENT_READ)
for _ in range(at_once):  # each with a request under way, asked again once answered
    ask()
print("flooding", flush=True)
end = time.monotonic() + seconds
while time.monotonic() < end:
    for key, _ in poll.select(0.5):
        poll.unregister(key.fileobj)
        key.fileobj.close()
        ask()
"""


def own_call(endpoint: str) -> int:
    """A pymesos-like call (no token) from this process's user."""
    call = {
        "type": "MESSAGE",
        "framework_id": {"value": "alice"},
        "executor_id": {"value": "ae"},
        "message": {"data": "aGVsbG8="},
    }
    request = urllib.request.Request(
        f"http://{endpoint}/api/v1/executor",
        json.dumps(call).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return int(answer.status)


async def test_a_neighbours_tokenless_calls_leave_the_executors_own_answered() -> None:
    heard: list[bytes] = []

    async def send_framework_message(data: bytes) -> None:
        heard.append(data)

    adapter = MesosExecutorAdapter("true")
    driver: Any = SimpleNamespace(
        framework_id="alice",
        executor_id="ae",
        token="alices.token",
        send_framework_message=send_framework_message,
    )
    adapter.driver = driver
    await adapter._serve()
    flood = await asyncio.create_subprocess_exec(
        *("/usr/bin/python3", "-c", FLOOD, adapter.endpoint),
        *(str(FLOOD_SECONDS), str(AT_ONCE)),
        user=NOBODY,
        cwd="/",
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert flood.stdout is not None
        assert await flood.stdout.readline() == b"flooding\n"
        await asyncio.sleep(2)  # (the flood under way: the attack's time)
        sent = time.monotonic()
        assert await asyncio.to_thread(own_call, adapter.endpoint) == 202
        took = time.monotonic() - sent
    finally:
        flood.kill()
        await flood.wait()
        await adapter._stop_http()
    print(f"the executor's own call: {took:.2f} s", file=sys.stderr)
    assert heard == [b"hello"]
    assert took < 1.0, f"the executor's own call was answered {took:.2f} s after it was sent"


async def test_a_neighbours_socket_is_told_from_the_executors_own() -> None:
    seen: list[bool] = []

    async def served(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await asyncio.to_thread(peer_is_own_user, writer.transport))
        writer.close()

    server = await asyncio.start_server(served, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    connect = f"import socket; socket.create_connection(('127.0.0.1', {port})).recv(1)"
    try:
        for user in (None, NOBODY):  # (this test's user, the adapter's; then another)
            other = await asyncio.create_subprocess_exec(
                "/usr/bin/python3", "-c", connect, user=user, cwd="/"
            )
            await other.wait()
    finally:
        server.close()
        await server.wait_closed()
    assert seen == [True, False]
