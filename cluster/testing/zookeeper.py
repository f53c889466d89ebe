"""A ZooKeeper server on 127.0.0.1, for tests, the soak and HA clusters on one machine.

Debian's `zookeeper` package (what `.ci/run` installs) run standalone from its jar, its
data in a directory of ours so that a restart keeps the sessions and the registry, as a
real ensemble member would.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from pathlib import Path

from protocol import logs
from protocol.tooling.brokers import BrokerError, end_process
from protocol.tooling.ports import PortTaken, free_port, wait_for_listener

log = logs.get("zookeeper-server")

# ZooKeeper's own bound is 20 ticks, 5 s at our 250 ms tick: it cut every longer session a
# master asked for (--zk-session-timeout, Mesos's 10 s) down to 5 s, silently
MAX_SESSION_MS = 60_000
JARS = ("/usr/share/java/zookeeper.jar", "/usr/share/java/zookeeper-jute.jar")
CONF = """tickTime={tick_ms}
dataDir={data}
clientPort={port}
clientPortAddress=127.0.0.1
admin.enableServer=false
minSessionTimeout={min_session_ms}
maxSessionTimeout={max_session_ms}
maxClientCnxns=0
4lw.commands.whitelist=ruok,srvr,cons
"""


def zookeeper_available() -> str | None:
    """Why ZooKeeper cannot run here, or None."""
    if shutil.which("java") is None:
        return "java is not installed (apt-get install zookeeper)"
    if not Path(JARS[0]).exists():
        return "ZooKeeper is not installed (apt-get install zookeeper)"
    return None


class ZooKeeperServer:
    def __init__(self, port: int | None = None, *, tick_ms: int = 250) -> None:
        self.port = port or free_port()
        self.tick_ms = tick_ms  # sessions may be as short as 2 ticks
        self.dir = Path(tempfile.mkdtemp(prefix="drfmesos-zk-"))
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, path: str = "/drfmesos") -> str:
        return f"zk://{self.hosts}{path}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    async def start(self) -> None:
        why = zookeeper_available()
        if why is not None:
            raise BrokerError(why)
        conf = self.dir / "zoo.cfg"
        conf.write_text(
            CONF.format(
                tick_ms=self.tick_ms,
                data=self.dir / "data",
                port=self.port,
                min_session_ms=2 * self.tick_ms,
                max_session_ms=MAX_SESSION_MS,
            )
        )
        classpath = ":".join(j for j in JARS if Path(j).exists())  # noqa: ASYNC240 - tiny
        out = await asyncio.to_thread(open, self.dir / "zookeeper.log", "ab")
        try:
            self._proc = await asyncio.create_subprocess_exec(
                "java",
                "-Xmx1g",  # (a registry of 100,000 slaves outgrew 256 MB: its JVM ended)
                f"-Dzookeeper.log.dir={self.dir}",
                "-cp",
                classpath,
                "org.apache.zookeeper.server.ZooKeeperServerMain",
                str(conf),
                stdout=out,
                stderr=out,
                stdin=asyncio.subprocess.DEVNULL,
            )
        finally:
            out.close()
        try:
            await wait_for_listener(self._proc, self.port, timeout=60)
        except (PortTaken, TimeoutError) as e:
            await self.stop(kill=True)
            raise BrokerError(f"ZooKeeper on port {self.port}: {e}") from None
        log.info("zookeeper.started", port=self.port, pid=self._proc.pid)

    async def stop(self, *, kill: bool = False) -> None:
        proc, self._proc = self._proc, None
        await end_process(proc, kill=kill)

    async def close(self) -> None:
        await self.stop(kill=True)
        with contextlib.suppress(OSError):
            shutil.rmtree(self.dir)

    async def __aenter__(self) -> ZooKeeperServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
