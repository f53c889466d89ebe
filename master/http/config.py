"""Where and how the master serves HTTP (see master.http.api)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class HttpConfig:
    host: str = "127.0.0.1"
    port: int = 5050
    credentials: Path | None = None  # the credentials store; None: no authentication
    open_metrics: bool = False  # /metrics and /health without credentials
    cert: Path | None = None  # serve HTTPS with this certificate and key
    key: Path | None = None
    # /health says `behind` once the oldest unhandled message has waited this long
    max_backlog_age: float | None = 5.0
    # HTTP connections open at once from one client address (an IPv6 one's /64): more
    # behind a reverse proxy, whose clients all come from its address
    connections_per_address: int = 512


def address_of(url: str) -> str:
    """`http://HOST:PORT/` -> `HOST:PORT`: a master's address as `--http` takes it and as a
    standby knows its leader's (from the election), whichever scheme it serves."""
    return url.split("//")[-1].rstrip("/")


class CertificateUnusable(Exception):
    """`--http-cert`/`--http-key` cannot be loaded (not PEM, a key of another
    certificate, unreadable): said as such, not as the address."""


class PortTaken(Exception):
    """The `--http` address cannot be served at the process's start (in use, or not this
    process's to bind): it stops, as a Mesos master that cannot bind its port does."""
