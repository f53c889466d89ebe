"""Brokers: a URL for an existing one, or one we start ourselves.

`--broker` takes one of:

- `embedded`: an in-process amqtt broker on a free loopback port (needs nothing but pip);
- `mosquitto`: a local mosquitto process on a free loopback port, Nagle off, persistence on;
- `mqtt://[user:pass@]host:port`: a broker that is already running.

`open_broker(spec)` is an async context manager that yields the URL to connect to and
stops whatever it started on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from protocol import logs

log = logs.get("broker")


class BrokerError(RuntimeError):
    """A broker could not be named, started or reached."""


@dataclass(frozen=True, slots=True)
class BrokerURL:
    host: str
    port: int
    username: str | None = None
    password: str | None = None

    @classmethod
    def parse(cls, url: str) -> BrokerURL:
        parts = urlsplit(url if "://" in url else f"mqtt://{url}")
        if parts.scheme not in ("mqtt", "tcp"):
            raise BrokerError(f"broker URL must start with mqtt://, got {url!r}")
        if not parts.hostname:
            raise BrokerError(f"broker URL has no host: {url!r}")
        try:
            port = parts.port or 1883
        except ValueError:
            raise BrokerError(f"broker URL has a bad port: {url!r}") from None
        return cls(
            host=parts.hostname,
            port=port,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
        )

    def __str__(self) -> str:
        auth = f"{self.username}:***@" if self.username else ""
        return f"mqtt://{auth}{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """The full URL, credentials included (to hand to child processes)."""
        auth = ""
        if self.username:
            auth = self.username + (f":{self.password}" if self.password else "") + "@"
        return f"mqtt://{auth}{self.host}:{self.port}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def wait_for_port(host: str, port: int, timeout: float = 10.0) -> None:
    """Wait until something accepts TCP connections on host:port."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 1.0)
        except (OSError, TimeoutError):
            if loop.time() > deadline:
                raise BrokerError(f"nothing listens on {host}:{port} after {timeout}s") from None
            await asyncio.sleep(0.02)
            continue
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return


class EmbeddedBroker:
    """amqtt in this process, on 127.0.0.1."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self._broker: Any = None

    @property
    def url(self) -> BrokerURL:
        return BrokerURL("127.0.0.1", self.port)

    async def start(self) -> None:
        from amqtt.broker import Broker  # imported late: it is slow to import

        config = {
            "listeners": {"default": {"type": "tcp", "bind": f"127.0.0.1:{self.port}"}},
            "plugins": {
                "amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True},
            },
        }
        self._broker = Broker(config)
        await self._broker.start()
        log.info("broker.started", kind="embedded", url=str(self.url))

    async def stop(self) -> None:
        if self._broker is not None:
            broker, self._broker = self._broker, None
            # amqtt's shutdown can hang waiting on a client's reader; bound it.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(broker.shutdown(), 2.0)
            log.info("broker.stopped", kind="embedded", url=str(self.url))

    async def restart(self) -> None:
        await self.stop()
        await self.start()


MOSQUITTO_CONF = """\
user {user}
listener {port} 127.0.0.1
allow_anonymous true
set_tcp_nodelay true
persistence true
persistence_location {dir}/
autosave_interval 1
max_queued_messages 0
max_inflight_messages 0
max_keepalive 3600
log_dest none
"""


class MosquittoBroker:
    """A mosquitto process on 127.0.0.1 with Nagle off and persistence in a temp dir."""

    def __init__(self, port: int | None = None, executable: str | None = None) -> None:
        self.port = port or free_port()
        found = executable or shutil.which("mosquitto") or _sbin("mosquitto")
        if not found:
            raise BrokerError("mosquitto is not installed (apt-get install mosquitto)")
        self.executable: str = found
        self._dir = Path(tempfile.mkdtemp(prefix="drfmesos-mosquitto-"))
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> BrokerURL:
        return BrokerURL("127.0.0.1", self.port)

    async def start(self) -> None:
        conf = self._dir / "mosquitto.conf"
        # mosquitto started as root drops to user "mosquitto", which then cannot write
        # its persistence file into our private temp dir: stay the user we are.
        user = pwd.getpwuid(os.getuid()).pw_name
        conf.write_text(MOSQUITTO_CONF.format(port=self.port, dir=self._dir, user=user))
        self._proc = await asyncio.create_subprocess_exec(
            self.executable,
            "-c",
            str(conf),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            await wait_for_port("127.0.0.1", self.port)
        except BrokerError:
            await self.stop()
            raise
        log.info("broker.started", kind="mosquitto", url=str(self.url), pid=self._proc.pid)

    async def stop(self, *, kill: bool = False) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        if kill:
            proc.kill()
        else:
            proc.terminate()  # SIGTERM: mosquitto saves its persistence file first
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        log.info("broker.stopped", kind="mosquitto", url=str(self.url))

    async def restart(self) -> None:
        await self.stop()
        await self.start()

    def cleanup(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)


def _sbin(name: str) -> str | None:
    for d in ("/usr/sbin", "/usr/local/sbin"):
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return None


@contextlib.asynccontextmanager
async def open_broker(spec: str) -> AsyncIterator[BrokerURL]:
    """Yield a broker URL for `embedded`, `mosquitto` or an mqtt:// URL."""
    if spec == "embedded":
        embedded = EmbeddedBroker()
        await embedded.start()
        try:
            yield embedded.url
        finally:
            await embedded.stop()
    elif spec == "mosquitto":
        mosq = MosquittoBroker()
        await mosq.start()
        try:
            yield mosq.url
        finally:
            await mosq.stop()
            mosq.cleanup()
    else:
        yield BrokerURL.parse(spec)
