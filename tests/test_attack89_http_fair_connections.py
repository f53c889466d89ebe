"""Two addresses cannot hold every HTTP connection the master has (attack89).

The master's HTTP doorman holds at most a bound of connections from one client address,
and a bound of all of them (its open-file limit less what it keeps). A tenant on the
master's host has every address of 127.0.0.0/8: half-sent requests from 127.0.0.2 and
127.0.0.3, each under the bound of an address, took the bound of all, and every other
client (the operator's page from 127.0.0.1, a Mesos HTTP framework from anywhere) was
refused for as long as they were held (aiohttp keeps such a connection an hour). Now
past the bound of all, the address that holds the most gives its oldest connection up to
a newcomer that holds fewer.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import aiohttp
import pytest
from aiohttp import web

from master.http.connections import Doorman
from master.http.log import RefusedLines
from protocol import logs

from harness.helpers import eventually

pytestmark = pytest.mark.timeout(60)

PER_ADDRESS = 4
MOST = 6


def half_heads(port: int, source: str, count: int) -> Iterator[socket.socket]:
    for _ in range(count):
        s = socket.socket()
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # (never ended)
        yield s


async def test_the_operator_is_answered_while_two_addresses_hold_every_connection() -> None:
    async def hello(_: web.Request) -> web.Response:
        return web.Response(text="hello")

    app = web.Application()
    app.router.add_get("/", hello)
    runner = web.AppRunner(app)
    await runner.setup()
    assert runner.server is not None
    doorman = Doorman(
        runner.server, RefusedLines(logs.get("test")), per_address=PER_ADDRESS, most=MOST
    )
    server = await asyncio.get_running_loop().create_server(doorman, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    held: list[socket.socket] = []
    try:
        held += half_heads(port, "127.0.0.2", PER_ADDRESS)
        held += half_heads(port, "127.0.0.3", PER_ADDRESS)
        await eventually(lambda: doorman.total == MOST)  # (the server took them)
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/") as answer,
        ):
            assert await answer.text() == "hello"
        assert doorman.total <= MOST
        assert max(doorman.open.values()) <= PER_ADDRESS
    finally:
        for s in held:
            s.close()
        server.close()
        await runner.cleanup()
