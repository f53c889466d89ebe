"""Brokers: a URL for an existing one, or one we start ourselves.

`--broker` takes one of:

- `embedded`: an in-process amqtt broker on a free loopback port (needs nothing but pip);
- `mosquitto`: a local mosquitto process on a free loopback port, Nagle off, persistence on;
- `mqtt://[user:pass@]host:port` or `mqtts://...` (TLS): a broker that is already running.

Either broker we start can check a credentials store (`auth=DIR`: passwords, ACLs, the
each connection's client id its own) and speak TLS with the store's certificate (`tls=True`).

`open_broker(spec)` is an async context manager that yields the URL to connect to and
stops whatever it started on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import signal
import ssl
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from protocol import logs
from protocol.extras import needs
from protocol.tooling.ports import PortTaken, free_port, wait_for_listener
from protocol.transport.aio import within

log = logs.get("broker")


class BrokerError(RuntimeError):
    """A broker could not be named, started or reached."""


@dataclass(frozen=True, slots=True)
class BrokerURL:
    host: str
    port: int
    username: str | None = None
    password: str | None = field(default=None, repr=False)  # never in a log line
    tls: bool = False
    ca: str | None = None  # the CA file that signed the broker's certificate (with tls)

    @classmethod
    def parse(cls, url: str, *, ca: str | None = None, secret_file: str | None = None) -> BrokerURL:
        """`mqtt[s]://[user[:secret]@]host:port`; `secret_file` holds the secret instead."""
        parts = urlsplit(url if "://" in url else f"mqtt://{url}")
        if parts.scheme not in ("mqtt", "tcp", "mqtts", "ssl"):
            raise BrokerError(f"broker URL must start with mqtt:// or mqtts://, got {url!r}")
        if not parts.hostname:
            raise BrokerError(f"broker URL has no host: {url.split('@')[-1]!r}")
        try:
            port = parts.port or (8883 if parts.scheme in ("mqtts", "ssl") else 1883)
        except ValueError:
            raise BrokerError(f"broker URL has a bad port: {url.split('@')[-1]!r}") from None
        password = unquote(parts.password) if parts.password else None
        if secret_file:
            try:
                password = Path(secret_file).read_text().strip()
            except OSError as e:
                raise BrokerError(f"cannot read the secret file {secret_file}: {e}") from None
        return cls(
            host=parts.hostname,
            port=port,
            username=unquote(parts.username) if parts.username else None,
            password=password,
            tls=parts.scheme in ("mqtts", "ssl"),
            ca=ca,
        )

    def with_credentials(self, username: str, password: str) -> BrokerURL:
        return replace(self, username=username, password=password)

    @property
    def scheme(self) -> str:
        return "mqtts" if self.tls else "mqtt"

    def __str__(self) -> str:
        auth = f"{self.username}:***@" if self.username else ""
        return f"{self.scheme}://{auth}{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """The full URL, credentials included (prefer a secret file for child processes)."""
        auth = ""
        if self.username:
            auth = self.username + (f":{self.password}" if self.password else "") + "@"
        return f"{self.scheme}://{auth}{self.host}:{self.port}"

    @property
    def bare(self) -> str:
        """The URL without credentials."""
        return f"{self.scheme}://{self.host}:{self.port}"

    def ssl_context(self) -> ssl.SSLContext | None:
        """For mqtts: verify the broker against `ca` (or the system's CAs)."""
        if not self.tls:
            return None
        try:
            return ssl.create_default_context(cafile=self.ca)
        except (OSError, ssl.SSLError) as e:  # (final: no attempt could trust the broker)
            raise BrokerError(f"cannot read the CA certificate {self.ca}: {e}") from None


def broker_from_env(url: str | None = None) -> BrokerURL:
    """`url`, or `DRFMESOS_BROKER`, or the local broker, read as the `drfmesos` command
    reads its `--broker`: with the secret in `DRFMESOS_SECRET_FILE` (when the URL names a
    principal and no secret) and the CA in `DRFMESOS_CA`, so that a framework written on
    the SDK runs on a secured cluster with the environment its tenant's tools use."""
    url = url or os.environ.get("DRFMESOS_BROKER") or "mqtt://127.0.0.1:1883"
    parsed = BrokerURL.parse(url)
    secret_file = os.environ.get("DRFMESOS_SECRET_FILE")
    wants_secret = parsed.username is not None and parsed.password is None
    ca = os.environ.get("DRFMESOS_CA")
    return BrokerURL.parse(url, ca=ca, secret_file=secret_file if wants_secret else None)


async def end_process(
    proc: asyncio.subprocess.Process | None, *, kill: bool = False, grace: float = 10.0
) -> bool:
    """SIGTERM (or SIGKILL with `kill`), then SIGKILL after `grace`; False if it had ended."""
    if proc is None or proc.returncode is not None:
        return False
    if kill:
        proc.kill()
    else:
        proc.terminate()
    try:
        await within(proc.wait(), grace)
    except TimeoutError:
        proc.kill()
        await proc.wait()
    return True


@dataclass(frozen=True)
class Listener:
    """Where a broker we start listens (127.0.0.1:`port`), and how: with a credentials
    store (`auth`) and TLS with the store's certificate, or neither."""

    port: int
    auth: Path | None = None
    tls: bool = False

    def __post_init__(self) -> None:
        if self.tls and self.auth is None:
            raise BrokerError("TLS uses the credentials store's certificate: give auth too")

    @property
    def url(self) -> BrokerURL:
        ca = str(self.auth / "ca.pem") if self.tls and self.auth else None
        return BrokerURL("127.0.0.1", self.port, tls=self.tls, ca=ca)


class EmbeddedBroker:
    """amqtt in this process, on 127.0.0.1."""

    def __init__(
        self, port: int | None = None, *, auth: Path | None = None, tls: bool = False
    ) -> None:
        self.listener = Listener(port or free_port(), auth, tls)
        self._broker: Any = None

    @property
    def url(self) -> BrokerURL:
        return self.listener.url

    async def start(self) -> None:
        with needs("embedded"):
            from amqtt.broker import Broker  # imported late: it is slow to import

            from protocol.tooling import amqtt_patches

        at = self.listener
        listener: dict[str, Any] = {"type": "tcp", "bind": f"127.0.0.1:{at.port}"}
        plugins: dict[str, Any] = {
            "amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}
        }
        if at.auth is not None:
            store = {"store": str(at.auth)}
            plugins = {
                "protocol.tooling.amqtt_auth.StoreAuthPlugin": store,
                "protocol.tooling.amqtt_auth.StoreTopicPlugin": store,
            }
            if at.tls:
                listener |= {
                    "ssl": True,
                    "certfile": str(at.auth / "broker.pem"),
                    "keyfile": str(at.auth / "broker.key"),
                }
        config = {"listeners": {"default": listener}, "plugins": plugins}
        self._broker = Broker(config)
        amqtt_patches.patch(self._broker)
        await self._broker.start()
        log.info("broker.started", kind="embedded", url=str(self.url))

    async def stop(self) -> None:
        if self._broker is not None:
            broker, self._broker = self._broker, None
            # amqtt's shutdown can hang waiting on a client's reader; bound it.
            with contextlib.suppress(Exception):
                await within(broker.shutdown(), 2.0)
            log.info("broker.stopped", kind="embedded", url=str(self.url))

    async def restart(self) -> None:
        await self.stop()
        await self.start()


MOSQUITTO_CONF = """\
user {user}
listener {port} 127.0.0.1
{anonymous}set_tcp_nodelay true
persistence true
persistence_location {dir}/
autosave_interval 1
{bounds}max_keepalive 3600
log_dest none
max_packet_size {max_packet}
"""


@dataclass(frozen=True)
class QueueBounds:
    """What mosquitto holds for one client at most: messages sent and not yet acknowledged
    (in flight), and messages waiting behind them (queued), by count and by payload bytes.
    Past them it drops what that client would be sent, so a client that subscribes and
    never reads (a hostile tenant's, or a stuck one's) costs the broker about this much,
    not every message its topics carry. Our parties re-send what they must (a slave its
    updates until acknowledged), and an event follower learns of a gap from the events'
    numbers (`cluster.local.events`). QoS 0 messages (the event stream, operators' only)
    mosquitto 2.0 bounds by `queued_messages` alone, as packets of any size.

    Every count is positive: mosquitto 2.0.11 as Debian ships it (with the fix for
    CVE-2023-28366, upstream 2.0.16) disconnects a client after *any* publish it drops
    (forbidden by the ACL, or too large) while that client's outgoing queue holds at least
    `max_queued_messages` packets, and 0 ("no maximum") made that every time. With a
    bound, a forbidden publish is dropped and the client stays connected: MQTT 3.1.1 has
    no word for "refused", so each call of ours expects an answer (a lease on the event
    stream too: `Watching`), and one that never comes says what the principal may be
    missing."""

    inflight_messages: int = 1000
    inflight_bytes: int = 16 * 1024 * 1024
    queued_messages: int = 100_000
    queued_bytes: int = 32 * 1024 * 1024

    def __post_init__(self) -> None:
        counts = (self.inflight_messages, self.inflight_bytes)
        if min(*counts, self.queued_messages, self.queued_bytes) <= 0:
            raise BrokerError("queue bounds must be positive (0 is no bound to mosquitto)")

    @property
    def conf(self) -> str:
        """The lines of mosquitto.conf (docker/mosquitto.conf carries the defaults too)."""
        return (
            f"max_inflight_messages {self.inflight_messages}\n"
            f"max_inflight_bytes {self.inflight_bytes}\n"
            f"max_queued_messages {self.queued_messages}\n"
            f"max_queued_bytes {self.queued_bytes}\n"
        )


# (no `use_username_as_clientid`: it lets a principal hold one connection at a time, and
# the ids our clients use cannot be guessed by other principals; see connection_id)
MOSQUITTO_AUTH = """\
allow_anonymous false
password_file {store}/passwd
acl_file {store}/acl
"""

MOSQUITTO_TLS = """\
cafile {store}/ca.pem
certfile {store}/broker.pem
keyfile {store}/broker.key
tls_version tlsv1.2
"""

MAX_PACKET_BYTES = 8 * 1024 * 1024  # the largest message a broker we start takes


class MosquittoBroker:
    """A mosquitto process on 127.0.0.1 with Nagle off and persistence in a temp dir."""

    def __init__(
        self,
        port: int | None = None,
        executable: str | None = None,
        *,
        auth: Path | None = None,
        tls: bool = False,
        bounds: QueueBounds | None = None,
    ) -> None:
        self.listener = Listener(port or free_port(), auth, tls)
        self.bounds = bounds or QueueBounds()
        found = executable or shutil.which("mosquitto") or _sbin("mosquitto")
        if not found:
            raise BrokerError("mosquitto is not installed (apt-get install mosquitto)")
        self.executable: str = found
        self._dir = Path(tempfile.mkdtemp(prefix="drfmesos-mosquitto-"))
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> BrokerURL:
        return self.listener.url

    async def start(self) -> None:
        listener, conf = self.listener, self._dir / "mosquitto.conf"
        # mosquitto started as root drops to user "mosquitto", which then cannot write
        # its persistence file into our private temp dir: stay the user we are.
        user = pwd.getpwuid(os.getuid()).pw_name
        text = MOSQUITTO_CONF.format(
            port=listener.port,
            dir=self._dir,
            user=user,
            max_packet=MAX_PACKET_BYTES,
            bounds=self.bounds.conf,
            anonymous="allow_anonymous true\n" if listener.auth is None else "",
        )
        if listener.auth is not None:
            text += MOSQUITTO_AUTH.format(store=listener.auth)
        if listener.tls:
            text += MOSQUITTO_TLS.format(store=listener.auth)
        conf.write_text(text)
        self._proc = await asyncio.create_subprocess_exec(
            self.executable,
            "-c",
            str(conf),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            await wait_for_listener(self._proc, listener.port)
        except (PortTaken, TimeoutError) as e:
            await self.stop()
            raise BrokerError(f"mosquitto on port {listener.port}: {e}") from None
        log.info("broker.started", kind="mosquitto", url=str(self.url), pid=self._proc.pid)

    async def stop(self, *, kill: bool = False) -> None:
        proc, self._proc = self._proc, None
        # SIGTERM: mosquitto saves its persistence file first
        if await end_process(proc, kill=kill):
            log.info("broker.stopped", kind="mosquitto", url=str(self.url))

    async def restart(self) -> None:
        await self.stop()
        await self.start()

    @property
    def pid(self) -> int | None:
        """The broker's process id while it runs (a benchmark reads its CPU time)."""
        return self._proc.pid if self._proc is not None else None

    def reload(self) -> None:
        """Re-read the password and ACL files (after `drfmesos auth add` or `remove`)."""
        if self._proc is not None and self._proc.returncode is None:
            self._proc.send_signal(signal.SIGHUP)

    def cleanup(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)


def _sbin(name: str) -> str | None:
    for d in ("/usr/sbin", "/usr/local/sbin"):
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return None


@contextlib.asynccontextmanager
async def open_broker(
    spec: str, *, ca: str | None = None, secret_file: str | None = None
) -> AsyncIterator[BrokerURL]:
    """Yield a broker URL for `embedded`, `mosquitto` or an mqtt[s]:// URL."""
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
        yield BrokerURL.parse(spec, ca=ca, secret_file=secret_file)
