"""Which local user a loopback TCP peer is: the kernel records each socket's owner, so a
server on 127.0.0.1 can tell one user's connections from another's (SO_PEERCRED answers
for Unix sockets only). Any process on a host may connect to, and bind, any loopback
address: counted by address, every local client was one (the master's HTTP bound filled
by one tenant's task shut the operator out: attack 95).
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import socket
import struct
import sys
from typing import Any


def peer_uid(transport: Any) -> int | None:
    """The uid of the TCP peer of `transport`, a connection on this host's loopback, as
    the kernel's sock_diag tells it of that one socket (some 20 us: on the event loop);
    None where it cannot say (not a TCP connection, not loopback, no such socket, or a
    kernel that does not answer)."""
    if transport is None:
        return None
    peer, own = transport.get_extra_info("peername"), transport.get_extra_info("sockname")
    if not isinstance(peer, tuple) or not isinstance(own, tuple) or len(peer) < 2:
        return None
    with contextlib.suppress(OSError, ValueError, struct.error):
        if not ipaddress.ip_address(str(peer[0]).partition("%")[0]).is_loopback:
            return None
        return _socket_uid(peer[0], peer[1], own[0], own[1])
    return None


def peer_is_own_user(transport: Any) -> bool:
    """Whether the TCP peer of `transport` (on this host's loopback) is a socket of this
    process's user, as the kernel records it: asked of the kernel about that one socket
    (sock_diag, some 20 us), or where it does not answer, read from the uid column of
    /proc/net/tcp and tcp6 (the whole table: some 15 ms on a host of a few thousand
    connections, which a neighbour's token-less calls had queued ahead of this
    executor's own for seconds: attack89). (Reads /proc: in a thread.)"""
    if transport is None:
        return False
    peer, own = transport.get_extra_info("peername"), transport.get_extra_info("sockname")
    if not peer or not own:
        return False
    with contextlib.suppress(OSError, ValueError, struct.error):
        uid = _socket_uid(peer[0], peer[1], own[0], own[1])
        return uid is not None and uid == os.geteuid()
    wanted = (_proc_address(peer[0], peer[1]), _proc_address(own[0], own[1]))
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            next(f, None)  # (the header)
            for line in f:
                fields = line.split()
                if len(fields) > 7 and (fields[1], fields[2]) == wanted:
                    return int(fields[7]) == os.geteuid()
    return False


NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
NO_COOKIE = 0xFFFFFFFF


def _socket_uid(host: str, port: int, peer_host: str, peer_port: int) -> int | None:
    """The uid of the TCP socket bound to (host, port) and connected to (peer_host,
    peer_port), as the kernel's sock_diag tells it of that one socket; None: no such
    socket. OSError where the kernel does not answer such questions."""
    address = ipaddress.ip_address(host)
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    sockid = struct.pack(
        "!HH16s16s",
        port,
        peer_port,
        address.packed.ljust(16, b"\0"),
        ipaddress.ip_address(peer_host).packed.ljust(16, b"\0"),
    ) + struct.pack("=III", 0, NO_COOKIE, NO_COOKIE)  # (any interface, any cookie)
    request = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + sockid
    header = struct.pack("=IHHII", 16 + len(request), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0)
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as s:
        s.settimeout(1.0)
        s.sendto(header + request, (0, 0))
        answer = s.recv(1 << 16)
    _, kind = struct.unpack_from("=IH", answer)
    if kind == NLMSG_ERROR:
        (error,) = struct.unpack_from("=i", answer, 16)
        if error == -errno.ENOENT:
            return None  # (no such socket)
        raise OSError(-error, os.strerror(-error))
    if kind != SOCK_DIAG_BY_FAMILY:
        raise OSError(errno.EPROTO, f"sock_diag answered {kind}")
    # inet_diag_msg: family, state, timer, retrans (4 bytes), its id (48), expires,
    # rqueue, wqueue (12), then the uid
    (uid,) = struct.unpack_from("=I", answer, 16 + 4 + 48 + 12)
    return int(uid)


def _proc_address(host: str, port: int) -> str:
    """An address as /proc/net/tcp writes it: the IP's bytes as the host orders a word,
    then the port, in hex."""
    packed = ipaddress.ip_address(host).packed
    order = -1 if sys.byteorder == "little" else 1
    words = [packed[i : i + 4][::order] for i in range(0, len(packed), 4)]
    return f"{b''.join(words).hex().upper()}:{port:04X}"
