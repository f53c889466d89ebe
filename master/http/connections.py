"""How many connections the master's HTTP side holds open, by client address and in all.

Anyone who reaches the port, with credentials or none, may open a connection and send
half a request head (slowloris): aiohttp keeps it an hour, and a connection is a file.
1,100 of them from one address took every file a master under systemd's default soft
limit (1,024) may open: nobody's request was answered, not the operator's page nor a Mesos
HTTP framework's call, and asyncio logged a traceback every second (attack88). So one
client address (an IPv6 one's /64) holds at most CONNECTIONS_PER_ADDRESS connections at
once (a flood of 300 wrong passwords from one address stays under it, each answered),
and all addresses together leave FILES_KEPT of the master's open-file limit (its soft
one lifted to the hard one) to its own files and sockets (its registry, the broker,
ZooKeeper). Past its address's bound, a new connection is closed as it is taken, with a
line in the log (`http.connection_refused`, sampled by address), as nginx's `limit_conn`
refuses one. Past the bound of all, the address that holds the most gives its oldest
connection up to a newcomer whose address holds fewer: two addresses (127.0.0.2 and
127.0.0.3, a tenant's on the master's own host) had held every connection there was, and
every other client was refused (attack89). Over HTTPS a connection is counted from its
TCP handshake, not its TLS one: one that never begins TLS is held until
HANDSHAKE_SECONDS, and counted meanwhile.
"""

from __future__ import annotations

import asyncio
import ipaddress
import resource
import ssl
from collections.abc import Callable
from typing import Any

from aiohttp import web

from master.http.config import HttpConfig
from master.http.log import RefusedLines
from protocol.tooling.peer_uid import peer_uid

CONNECTIONS_PER_ADDRESS = HttpConfig().connections_per_address  # by default
FILES_KEPT = 256  # of the open-file limit, never taken by HTTP connections
LEAST_CONNECTIONS = 64  # in all, however low the limit
HANDSHAKE_SECONDS = 10.0  # a TLS handshake, at most
LOOPBACK = ipaddress.IPv4Address("127.0.0.1")  # a local client's, unless it chooses
LOOPBACKS = ipaddress.IPv4Network("127.0.0.0/8")  # the rest: one client, chosen


def most_connections() -> int:
    """The connections every address may hold together: the soft open-file limit, less
    what the master keeps for its own files."""
    soft, _ = lift_file_limit()
    if soft == resource.RLIM_INFINITY:
        return 1 << 20
    return max(LEAST_CONNECTIONS, soft - FILES_KEPT)


def lift_file_limit() -> tuple[int, int]:
    """Lift the soft open-file limit to the hard one, as the slave does (slave/cli.py);
    the limits then. systemd's soft 1,024 is kept low for select(), which asyncio does not
    use (its hard one is 524,288): the bound of 768 connections it gave, which 384 Mesos
    HTTP frameworks fill (a SUBSCRIBE stream and a call connection each), refused the
    next framework and the operator's page."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):  # (a hard limit past the kernel's nr_open)
            pass
    return soft, hard


def client_of(host: object, uid: int | None = None) -> str:
    """The client a connection from `host` is counted as: its IPv4 address (also when
    mapped into IPv6), or its IPv6 address's /64, which one host or site is given whole
    (counted by address, it would hold 2**64 times the bound). Every loopback address
    but 127.0.0.1 (where a local client speaks from unless it chooses) is one client:
    any process on the master's host may bind any of 127.0.0.0/8, and one holding a
    connection from each of a few hundred of them had every connection there was. And a
    local one is its user's (`uid`, the kernel's owner of the peer's socket): one
    tenant's task on the master's host held 127.0.0.1's whole bound, and every local
    client was refused, the operator's and every Mesos HTTP framework's (attack 95)."""
    client = _address_client(host)
    if uid is not None and client in (str(LOOPBACK), str(LOOPBACKS)):
        return f"{client} (uid {uid})"
    return client


def _address_client(host: object) -> str:
    try:
        address = ipaddress.ip_address(str(host).partition("%")[0])
    except ValueError:
        return str(host)
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is None:
            return str(ipaddress.ip_network(f"{address}/64", strict=False))
        address = address.ipv4_mapped
    if address.is_loopback and address != LOOPBACK:
        return str(LOOPBACKS)  # (chosen on purpose: one client, a host's own)
    return str(address)


class Doorman:
    """The protocol factory in front of aiohttp's server: counts the connections open by
    client address, and closes one past a bound before aiohttp sees it."""

    def __init__(
        self,
        factory: Callable[[], asyncio.Protocol],
        refused: RefusedLines,
        *,
        tls: ssl.SSLContext | None = None,
        per_address: int = CONNECTIONS_PER_ADDRESS,
        most: int | None = None,
    ) -> None:
        self.factory, self.refused, self.tls = factory, refused, tls
        self.handshakes: set[asyncio.Task[None]] = set()  # (kept while under way)
        self.per_address = per_address
        self.most = most_connections() if most is None else most
        self.doors: dict[str, dict[_Door, None]] = {}  # open, by client address, oldest first
        self.total = 0

    def __call__(self) -> asyncio.Protocol:
        return _Door(self)

    @property
    def open(self) -> dict[str, int]:
        """Connections open, by client address."""
        return {address: len(doors) for address, doors in self.doors.items()}

    def _held(self, address: str) -> int:
        return len(self.doors.get(address, ()))

    def admit(self, door: _Door) -> bool:
        """Count `door`'s connection in, if the bounds let it: past the bound of all, in
        the place of the oldest of the address that holds the most, if that is more than
        `door`'s address would."""
        address = door.address
        held = self._held(address)
        if held < self.per_address and self.total >= self.most:
            most = max(self.doors, key=self._held, default=address)
            if self._held(most) > held + 1:
                oldest = next(iter(self.doors[most]))
                oldest.evict()
        if held >= self.per_address or self.total >= self.most:
            self.refused.refused(
                "http.connection_refused",
                remote=address,
                open_from_address=held,
                open=self.total,
            )
            return False
        self.doors.setdefault(address, {})[door] = None
        self.total += 1
        return True

    def left(self, door: _Door) -> None:
        address = door.address
        self.total -= 1
        doors = self.doors[address]
        del doors[door]
        if not doors:
            del self.doors[address]


class _Door(asyncio.Protocol):
    """One connection: aiohttp's handler behind it once admitted (and, over HTTPS, once
    its TLS handshake is done), nothing if not."""

    def __init__(self, doorman: Doorman) -> None:
        self.doorman = doorman
        self.inner: asyncio.Protocol | None = None
        self.address = ""
        self.counted = False
        self.transport: asyncio.BaseTransport | None = None
        # what TLS decrypted before the handshake's waiter woke (its first read comes
        # at once), for aiohttp's handler once it is made
        self.early: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        host = peer[0] if isinstance(peer, tuple) and peer else peer
        self.address = client_of(host, peer_uid(transport))
        self.transport = transport
        if not self.doorman.admit(self):
            transport.close()  # (nothing was read or written: closed at once)
            return
        self.counted = True
        tls = self.doorman.tls
        if tls is None:
            self._serve(transport)
            return
        assert isinstance(transport, asyncio.Transport)
        handshake = asyncio.ensure_future(self._handshake(transport, tls))
        self.doorman.handshakes.add(handshake)
        handshake.add_done_callback(self.doorman.handshakes.discard)

    async def _handshake(self, transport: asyncio.Transport, tls: ssl.SSLContext) -> None:
        try:
            wrapped = await asyncio.get_running_loop().start_tls(
                transport, self, tls, server_side=True, ssl_handshake_timeout=HANDSHAKE_SECONDS
            )
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError):
            transport.abort()
            self._uncount()
            return
        if wrapped is None:  # (closed meanwhile)
            self._uncount()
            return
        self._serve(wrapped)

    def _serve(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.inner = self.doorman.factory()
        self.inner.connection_made(transport)
        early, self.early = self.early, []
        for data in early:
            self.inner.data_received(data)

    def _uncount(self) -> None:
        if self.counted:
            self.counted = False
            self.doorman.left(self)

    def evict(self) -> None:
        """Its place is given to another's connection: uncounted now, closed."""
        self._uncount()
        if isinstance(self.transport, asyncio.Transport):
            self.transport.abort()  # (its connection_lost comes: aiohttp's handler ends)

    def connection_lost(self, exc: Exception | None) -> None:
        self._uncount()
        if self.inner is not None:
            self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.inner is not None:
            self.inner.data_received(data)
        elif self.counted:
            self.early.append(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()


class BoundedSite(web.BaseSite):
    """aiohttp's TCPSite, its connections counted by a Doorman."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
        log: Any,
        per_address: int = CONNECTIONS_PER_ADDRESS,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context)
        self.host, self.port, self.per_address = host, port, per_address
        self.refused = RefusedLines(log)
        self.doorman: Doorman | None = None  # (once started)

    @property
    def name(self) -> str:
        return f"{'https' if self._ssl_context else 'http'}://{self.host}:{self.port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        self.doorman = Doorman(
            server, self.refused, tls=self._ssl_context, per_address=self.per_address
        )
        self._server = await asyncio.get_running_loop().create_server(
            self.doorman,
            self.host,
            self.port,
            backlog=self._backlog,
        )  # (TLS is the doorman's to begin, once it counted the connection)

    async def stop(self) -> None:
        self.refused.close()
        if self.doorman is not None:
            for handshake in list(self.doorman.handshakes):
                handshake.cancel()  # (start_tls closes its connection)
        await super().stop()
