"""A TCP proxy on loopback whose way back to its clients can be stopped: a party's link that
has stopped carrying, with what waits in it bounded, so that the broker's own bound on
what it holds for that party is what decides (a stopped process's own socket would take
in as much as the kernel lets it grow, tens of MiB on loopback, and differently each run)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path

from protocol.transport.aio import cancel_and_wait

BUFFER = 64 * 1024  # bytes each socket of the proxy holds (fixed: the kernel grows it no more)


class Proxy:
    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.port = 0
        self.carrying = asyncio.Event()  # cleared: nothing goes back to the clients
        self.carrying.set()
        self.pumps: set[asyncio.Task[None]] = set()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER)  # (before it connects)
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", self.upstream))
        except OSError:
            sock.close()
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection(sock=sock, limit=BUFFER)
        for source, sink, gate in ((reader, up_writer, None), (up_reader, writer, self.carrying)):
            self.pumps.add(asyncio.create_task(self.pump(source, sink, gate)))

    @staticmethod
    async def pump(
        source: asyncio.StreamReader, sink: asyncio.StreamWriter, gate: asyncio.Event | None
    ) -> None:
        try:
            while True:
                if gate is not None:
                    await gate.wait()
                chunk = await source.read(BUFFER)
                if not chunk:
                    break
                sink.write(chunk)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            sink.close()


@contextlib.asynccontextmanager
async def proxy_to(port: int) -> AsyncIterator[Proxy]:
    """A proxy on 127.0.0.1 to `port` on 127.0.0.1, for the time of the block."""
    proxy = Proxy(port)
    server = await asyncio.start_server(proxy.serve, "127.0.0.1", 0, limit=BUFFER)
    proxy.port = server.sockets[0].getsockname()[1]
    try:
        yield proxy
    finally:
        server.close()
        for pump in proxy.pumps:
            await cancel_and_wait(pump)
        await server.wait_closed()


def largest_send_buffer() -> int:
    """The bytes a TCP socket's send buffer may grow to here (the kernel's bound on it)."""
    return int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
