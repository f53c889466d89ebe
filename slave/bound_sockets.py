"""TCP sockets bound to a port and neither listening nor connected: they hold the port
(another's bind or listen there fails) and are in no /proc/net/tcp table. Linux 6.10
lists them in sock_diag's dump of a pseudo-state of their own, TCP_BOUND_INACTIVE (what
`ss --bound-inactive` reads); pyroute2 speaks the netlink protocol. On an older kernel
the dump is empty: such a socket is not seen there (the docs say so)."""

from __future__ import annotations

import socket

TCP_BOUND_INACTIVE = 13  # (include/net/tcp_states.h, Linux 6.10)


def bound_inactive() -> dict[int, int]:
    """The host's bound-inactive TCP sockets (v4 and v6): socket inode -> port; empty
    where the kernel or the platform cannot say. Blocking, and never on a thread running
    an event loop: pyroute2 runs one of its own for the dump (about 9 ms a look; the
    ports isolator asks from its thread, every 5 s by default)."""
    try:
        from pyroute2.netlink.diag import DiagSocket
        from pyroute2.netlink.exceptions import NetlinkError
    except ImportError:  # (not Linux: no netlink)
        return {}
    found: dict[int, int] = {}
    try:
        with DiagSocket() as diag:
            diag.bind()
            for family in (socket.AF_INET, socket.AF_INET6):
                for sock in diag.get_sock_stats(family=family, states=1 << TCP_BOUND_INACTIVE):
                    found[int(sock["idiag_inode"])] = int(sock["idiag_sport"])
    except (OSError, NetlinkError):
        return {}
    return found
