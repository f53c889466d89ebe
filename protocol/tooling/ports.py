"""Loopback ports for the servers we start: picking free ones, and knowing that the
server we started, not some other process, is the one listening.

Ports are picked below the kernel's ephemeral range, where nothing picks at random (a
client that dials a port in that range before its listener is up can be given that
same port as its own source and connect to itself), and below a slave's default
offered ports (31000-32000), where tasks listen. Test processes run side by side
(pytest-xdist): each worker picks from its own slice of that span, and one process
never hands out a port twice, so two servers being started at once are never given
one port (a port is free when picked and bound only seconds later, once a JVM is up).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import socket
from pathlib import Path

from protocol.transport.aio import within

TASK_PORTS = 31_000  # where a slave's default offered ports begin
SLICES = 16  # side-by-side test processes with a span of their own
_handed_out: set[int] = set()
# how /proc/net/tcp{,6} spell the addresses whose listener holds 127.0.0.1:PORT (itself,
# any, any of a dual-stack socket, IPv4-mapped): one on ::1 alone, say, is no hindrance
LOOPBACK_V4 = {"0100007F", "00000000", "0" * 32, "0000000000000000FFFF00000100007F"}


class PortTaken(Exception):
    """The server we started could not listen on its port: another process holds it."""


def free_port(n: int = 1) -> int:
    """The first of `n` consecutive loopback ports free now, never handed out before by
    this process, in this process's slice of the span below the ephemeral range."""
    span = _slice()
    start = random.randrange(len(span))
    for i in range(len(span)):
        base = span[(start + i) % len(span)]
        ports = range(base, base + n)
        if _handed_out.isdisjoint(ports) and ports[-1] < span.stop and _bindable(ports):
            _handed_out.update(ports)
            return base
    raise OSError(f"no {n} free consecutive loopback ports in {span.start}-{span.stop - 1}")


def _slice() -> range:
    low, high = _ephemeral_range()
    span = range(10_000, min(low, TASK_PORTS)) if low > 12_000 else range(high + 1, 65_536)
    worker = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    if worker is None:
        return span
    size = len(span) // SLICES
    first = span.start + (int(worker[1]) % SLICES) * size
    return range(first, first + size)


def _bindable(ports: range) -> bool:
    held: list[socket.socket] = []
    try:
        for port in ports:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(s)
            s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        for s in held:
            s.close()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32_768, 60_999  # (Linux's default)


async def wait_for_port(host: str, port: int, timeout: float = 10.0) -> None:
    """Wait until something accepts TCP connections on host:port (TimeoutError after
    `timeout`)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            _, writer = await within(asyncio.open_connection(host, port), 1.0)
        except (OSError, TimeoutError):
            if loop.time() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port} after {timeout}s") from None
            await asyncio.sleep(0.02)
            continue
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return


async def wait_for_listener(
    proc: asyncio.subprocess.Process, port: int, timeout: float = 10.0
) -> None:
    """Wait until the process `proc` listens on TCP `port`. Raises PortTaken if it ends
    first, or if another process listens there (it could not bind), and TimeoutError
    after `timeout`. Where /proc cannot tell whose socket it is, anything listening
    will do."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if proc.returncode is not None:
            raise PortTaken(f"exited ({proc.returncode}) before it listened on port {port}")
        owner = await asyncio.to_thread(_listener_is, proc.pid, port)
        if owner is None:
            return await wait_for_port("127.0.0.1", port, max(deadline - loop.time(), 0.1))
        if owner:
            return
        if loop.time() > deadline:
            raise TimeoutError(f"pid {proc.pid} does not listen on port {port} after {timeout}s")
        await asyncio.sleep(0.02)


def _listener_is(pid: int, port: int) -> bool | None:
    """True if `pid` holds a socket listening on `port`; False if it does not (PortTaken
    if another process does); None where /proc cannot tell."""
    listening = set()
    try:
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with contextlib.suppress(FileNotFoundError), open(table) as rows:
                next(rows)
                for row in rows:
                    fields = row.split()
                    local, state, inode = fields[1], fields[3], fields[9]
                    address, at = local.rsplit(":", 1)
                    if state == "0A" and int(at, 16) == port and address in LOOPBACK_V4:
                        listening.add(f"socket:[{inode}]")
    except OSError:
        return None
    if not listening:
        return False
    with contextlib.suppress(OSError):  # (ended: its fds are gone)
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd) in listening:
                    return True
    raise PortTaken(f"another process listens on port {port} (pid {pid} could not bind it)")
