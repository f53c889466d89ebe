"""Attack 95: a tenant's task on the host held every local connection of a server.

Tasks share the host's loopback, and a server there counted its clients by address:

- the master's HTTP side holds at most 512 connections from one client address, and all
  of 127.0.0.1 was one: a tenant's task (or any process of a tenant on the master's host,
  where plain-HTTP Mesos frameworks run) holding 512 idle connections, and replacing
  any that closed, shut out every local client, the operator's `POST /api/v1` and every
  Mesos framework's SUBSCRIBE;
- a Mesos executor's adapter (frameworks.mesos_executor) took every connection: another
  tenant's task held 1,100 idle ones to it, past its 1,024 files, and the executor's own
  calls timed out (its launches stalled 99 s) while accept()'s tracebacks filled its
  sandbox (361 MB).

Now a local client is its user's (the kernel's owner of the peer's socket, sock_diag):
the master counts each local user's connections apart, and the adapter holds at most 16
of other users' at once, closing the rest as it takes them. The neighbour runs as user
nobody; the operator and the executor's own client as this test's user.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
from test_attack89_executor_peer_check_flood import NOBODY, own_call

from cluster.local.secure import provision
from frameworks.mesos_executor import MesosExecutorAdapter
from master.http.config import HttpConfig
from master.http.connections import CONNECTIONS_PER_ADDRESS
from master.master import Master, MasterConfig
from protocol.transport.aio import within
from protocol.transport.memory import MemoryBroker
from protocol.wire.topics import Topics

from harness.helpers import basic, eventually, open_transport

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.skipif(os.geteuid() != 0, reason="the neighbour runs as another user"),
]

# argv: port, connections. Holds them (idle: not a byte sent), says how many it opened.
HOLD = """
import resource, socket, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
port, count = int(sys.argv[1]), int(sys.argv[2])
held = []
for _ in range(count):
    try:
        held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
    except OSError:
        pass
print(len(held), flush=True)
sys.stdin.read()
"""


@contextlib.asynccontextmanager
async def neighbour(port: int, count: int) -> Any:
    held = await asyncio.create_subprocess_exec(
        "/usr/bin/python3", "-c", HOLD, str(port), str(count),
        user=NOBODY, cwd="/", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert held.stdout is not None
        assert int(await within(held.stdout.readline(), 60)) == count
        yield
    finally:
        held.kill()
        await held.wait()


async def test_a_local_tenants_connections_leave_the_operator_answered(tmp_path: Path) -> None:
    store = provision(tmp_path / "auth", [("master", "master"), ("ops", "operator")])
    async with contextlib.AsyncExitStack() as stack:
        broker = MemoryBroker(store.principals.values())
        config = MasterConfig(
            principals=store.principals_file, http=HttpConfig(port=0, credentials=store.path)
        )
        bus = await open_transport(stack, broker.connector("master"), "master")
        master = Master(bus, Topics("attack95http"), config)
        await master.start()
        stack.push_async_callback(master.stop)
        await eventually(lambda: bool(master.web_ui))
        port = urlsplit(master.web_ui).port
        assert port is not None
        async with neighbour(port, CONNECTIONS_PER_ADDRESS + 50):
            right = {"Authorization": basic("ops", store.secret_file("ops").read_text().strip())}
            async with (
                aiohttp.ClientSession(headers=right, timeout=aiohttp.ClientTimeout(total=5)) as s,
                s.get(f"{master.web_ui}api/v1/whoami") as r,
            ):
                assert r.status == 200
                assert (await r.json())["principal"] == "ops"


async def test_another_users_connections_to_an_executors_api_are_closed() -> None:
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
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (1_024, hard))  # (a task's: TASK_OPEN_FILES)
    await adapter._serve()
    try:
        port = int(adapter.endpoint.rsplit(":", 1)[1])
        async with neighbour(port, 1_100):
            assert await asyncio.to_thread(own_call, adapter.endpoint) == 202
    finally:
        await adapter._stop_http()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert heard == [b"hello"]
