"""An unmodified pymesos 0.3.15 framework on a live, secure drfmesos cluster, through
Mesos's v1 Scheduler HTTP API: it runs 50 command tasks, sees them all finish, kills a
task and reconciles it (tests/programs/pymesos_scheduler.py).

pymesos needs http-parser built without its C extension (.ci/pymesos.sh): outside CI a
machine without them skips, in CI that is a failure."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from cluster.testing import reachable
from cluster.testing.ha import HACluster, HAConfig

from conftest import need_mosquitto, need_zookeeper
from harness.helpers import secure_cluster
from task_python import task_env_args

CLUSTER = "pymesos"
PRINCIPALS = [("master", "master"), ("ops", "operator"), ("slave-0", "slave"),
              ("slave-1", "slave"), ("team-a", "framework")]  # fmt: skip
PROGRAM = Path(__file__).parent / "programs" / "pymesos_scheduler.py"
EXECUTOR = Path(__file__).parent / "programs" / "pymesos_executor.py"


def need_pymesos() -> None:
    if importlib.util.find_spec("pymesos") and importlib.util.find_spec("http_parser"):
        return
    if os.environ.get("CI"):
        pytest.fail("pymesos is not installed; .ci/run installs it (.ci/pymesos.sh)")
    pytest.skip("pymesos is not installed (bash .ci/pymesos.sh)")


class Framework:
    """The pymesos program, its lines read one at a time."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[list[str]] = []

    async def until(self, *words: str, timeout: float = 60.0) -> list[str]:
        """Read lines until one starts with `words`; that line."""
        assert self.process.stdout is not None
        async with asyncio.timeout(timeout):
            while True:
                raw = await self.process.stdout.readline()
                assert raw, f"the framework ended before {words}: {self.lines[-5:]}"
                line = raw.decode().split()
                self.lines.append(line)
                if tuple(line[: len(words)]) == words:
                    return line


@contextlib.asynccontextmanager
async def running(process: asyncio.subprocess.Process) -> AsyncIterator[Framework]:
    """The program, ended when the block is (its stdin closed, then killed if need be)."""
    try:
        yield Framework(process)
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            async with asyncio.timeout(10):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()


async def test_pymesos_runs_50_tasks_kills_one_and_reconciles(tmp_path: Path) -> None:
    """On slaves that run each principal's tasks as a user of its own: pymesos's executor
    calls its adapter with no token (pymesos 0.3.15 sends none), from that user."""
    need_mosquitto()
    need_pymesos()
    reachable(tmp_path)
    slaves = [(f"slave-{i}", "--resources", "cpus:4;mem:2048", *task_env_args()) for i in range(2)]
    async with secure_cluster(tmp_path, CLUSTER, PRINCIPALS, slaves) as c:
        master = c.web.split("//")[1].rstrip("/")
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(PROGRAM), master, "team-a",
            str(c.store.secret_file("team-a")), "50", f'"$DRFMESOS_PYTHON" {EXECUTOR}',
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with running(process) as fw:
            await fw.until("REGISTERED")
            await fw.until("FINISHED_ALL", timeout=120)
            finished = {line[1] for line in fw.lines if line[:1] == ["STATUS"]
                        and line[2] == "TASK_FINISHED"}  # fmt: skip
            # 50 command tasks, and 3 under pymesos's MesosExecutorDriver, which sent
            # each task's data back as a framework message
            assert finished == {f"short-{i}" for i in range(50)} | {f"exec-{i}" for i in range(3)}
            echoed = [line[2] for line in fw.lines if line[:1] == ["MESSAGE"]]
            assert echoed == ["ZWNobzpoZWxsbw=="] * 3  # base64 of "echo:hello"
            # every update the slave sent wanted an acknowledgement (pymesos sends it)
            assert all(line[3] == "uuid" for line in fw.lines if line[:1] == ["STATUS"])
            await fw.until("STATUS", "long", "TASK_KILLED", "uuid")
            # the reconciliation's answer: from the master, no acknowledgement due
            await fw.until("STATUS", "long", "TASK_KILLED", "-")


def leader_infos(hosts: str, path: str = "/mesos") -> list[dict[str, Any]]:
    """The json.info_ nodes, lowest sequence first, as a Mesos client reads them."""
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=hosts)
    zk.start(10)
    try:
        children = sorted(zk.get_children(path)) if zk.exists(path) else []
        assert all(c.startswith("json.info_") for c in children), children
        return [json.loads(zk.get(f"{path}/{c}")[0]) for c in children]
    finally:
        zk.stop()
        zk.close()


async def leader_info(hosts: str, port: int) -> dict[str, Any]:
    """The only json.info_ node, once it is the master's at `port` (the leader writes it
    just after it announces itself on the bus)."""
    async with asyncio.timeout(30):
        while True:
            infos = await asyncio.to_thread(leader_infos, hosts)
            if [i["address"]["port"] for i in infos] == [port]:
                return infos[0]
            await asyncio.sleep(0.1)


async def redirect_from(port: int) -> tuple[int, str]:
    """A SUBSCRIBE to the master at `port`, once it listens (a standby may still be
    starting when the leader is elected): its status and Location."""
    async with aiohttp.ClientSession() as http, asyncio.timeout(30):
        while True:
            try:
                async with http.post(
                    f"http://127.0.0.1:{port}/api/v1/scheduler",
                    json={"type": "SUBSCRIBE"},
                    allow_redirects=False,
                ) as r:
                    if r.status != 503:  # (503: it does not know the leader yet)
                        return r.status, r.headers.get("Location", "")
            except aiohttp.ClientConnectorError:
                pass
            await asyncio.sleep(0.2)


@pytest.mark.slow(11)
async def test_pymesos_finds_the_leader_in_zookeeper_and_follows_a_failover(
    tmp_path: Path,
) -> None:
    need_mosquitto()
    need_zookeeper()
    need_pymesos()
    config = HAConfig(masters=2, slaves=1, frameworks=0, slave_resources="cpus:4;mem:2048",
                      log_level="warning")  # fmt: skip
    async with HACluster(tmp_path / "ha", config) as ha:
        first = await ha.wait_for_leader(timeout=60)
        port = ha.http_ports[str(ha.leader_name())]
        info = await leader_info(ha.zk.hosts, port)
        assert info["pid"] == f"master@127.0.0.1:{port}"
        assert info["address"] == {"ip": "127.0.0.1", "port": port, "hostname": "127.0.0.1"}
        assert info["id"]
        assert info["version"].startswith("1.")
        # a standby sends Mesos frameworks to the leader, as Mesos's standbys do
        (standby,) = set(ha.http_ports.values()) - {port}
        status, location = await redirect_from(standby)
        assert status == 307
        assert location == f"//127.0.0.1:{port}/api/v1/scheduler"
        secret = tmp_path / "secret"  # (this cluster has no credentials: any will do)
        secret.write_text("unused")
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(PROGRAM), f"zk://{ha.zk.hosts}/mesos", "team-a", str(secret),
            "5", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with running(process) as fw:
            await fw.until("FINISHED_ALL", timeout=120)
            await fw.until("STATUS", "long", "TASK_KILLED", "-")
            ha.kill(str(ha.leader_name()))
            await ha.wait_for_leader(newer_than=first.epoch, timeout=60)
            await fw.until("REREGISTERED", timeout=60)
            # the new leader answers its reconciliation: the framework is known by its id
            await fw.until("STATUS", "long")
            await leader_info(ha.zk.hosts, ha.http_ports[str(ha.leader_name())])
