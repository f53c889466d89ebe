"""A tenant's addresses cannot hold every HTTP connection the master has (attack89).

The master's HTTP doorman holds at most a bound of connections from one client address,
and a bound of all of them (its open-file limit less what it keeps). A tenant on the
master's host has every address of 127.0.0.0/8: half-sent requests from a few of them
(or one connection from each of a few hundred), each under the bound of an address,
took the bound of all, and every other client (the operator's page from 127.0.0.1, a
Mesos HTTP framework from anywhere) was refused for as long as they were held (aiohttp
keeps such a connection an hour). Now every loopback address but 127.0.0.1 is one
client, and past the bound of all, the client that holds the most gives its oldest
connection up to a newcomer that holds fewer.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import aiohttp
import pytest
from aiohttp import web

from master.http.connections import Doorman, client_of
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


@dataclass
class Site:
    """A site saying hello behind a doorman of PER_ADDRESS and MOST, on 127.0.0.1."""

    doorman: Doorman
    port: int
    held: list[socket.socket]  # (closed at its end)

    async def hello(self) -> str:
        """What the operator is answered, from 127.0.0.1."""
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{self.port}/") as answer,
        ):
            return await answer.text()


@contextlib.asynccontextmanager
async def site() -> AsyncIterator[Site]:
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
    opened = Site(doorman, server.sockets[0].getsockname()[1], [])
    try:
        yield opened
    finally:
        for s in opened.held:
            s.close()
        server.close()
        await runner.cleanup()


async def test_the_operator_is_answered_while_a_tenant_holds_every_connection() -> None:
    async with site() as s:
        s.held += half_heads(s.port, "127.0.0.2", PER_ADDRESS)  # (its address's bound)
        s.held += half_heads(s.port, "127.0.0.1", MOST - PER_ADDRESS)  # (the operator's too)
        await eventually(lambda: s.doorman.total == MOST)  # (the server took them)
        assert await s.hello() == "hello"
        assert s.doorman.total <= MOST
        assert max(s.doorman.open.values()) <= PER_ADDRESS


async def test_the_operator_is_answered_while_many_loopback_addresses_hold_one_each() -> None:
    async with site() as s:
        for n in range(2, 2 + 2 * MOST):  # (a connection from each of 12 addresses)
            s.held += half_heads(s.port, f"127.0.0.{n}", 1)
        await eventually(lambda: s.doorman.total == PER_ADDRESS)  # (the server took them)
        assert await s.hello() == "hello"


def test_every_loopback_address_but_127_0_0_1_is_one_client() -> None:
    assert client_of("127.0.0.1") == client_of("::ffff:127.0.0.1") == "127.0.0.1"
    assert client_of("127.0.0.2") == client_of("127.9.8.7") == "127.0.0.0/8"
    assert client_of("::ffff:127.0.0.2") == "127.0.0.0/8"
    assert client_of("::1") == "::/64"
    assert client_of("192.0.2.7") == "192.0.2.7"
