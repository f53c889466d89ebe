"""An unmodified pymesos 0.3.15 framework on a live, secure drfmesos cluster, through
Mesos's v1 Scheduler HTTP API: it runs 50 command tasks, sees them all finish, kills a
task and reconciles it (tests/programs/pymesos_scheduler.py).

pymesos needs http-parser built without its C extension (.ci/pymesos.sh): outside CI a
machine without them skips, in CI that is a failure."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from cluster.testing import reachable
from cluster.testing.ha import HACluster, HAConfig
from protocol.tooling.ports import free_port

from conftest import need_mosquitto, need_zookeeper
from harness.helpers import SecureCluster, eventually, secure_cluster
from harness.pymesos import need_pymesos, running
from harness.slave import http_server
from task_python import task_env_args

CLUSTER = "pymesos"
PRINCIPALS = [("master", "master"), ("ops", "operator"), ("slave-0", "slave"),
              ("slave-1", "slave"), ("team-a", "framework")]  # fmt: skip
PROGRAM = Path(__file__).parent / "programs" / "pymesos_scheduler.py"
EXECUTOR = Path(__file__).parent / "programs" / "pymesos_executor.py"
LIFECYCLE = Path(__file__).parent / "programs" / "pymesos_lifecycle.py"
WEB_EXECUTOR = Path(__file__).parent / "programs" / "pymesos_web_executor.py"


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


async def lifecycle(c: SecureCluster, tasks: list[dict[str, Any]]) -> asyncio.subprocess.Process:
    """pymesos_lifecycle.py as team-a on `c`, launching `tasks` (Mesos TaskInfo JSON)."""
    master = c.web.split("//")[1].rstrip("/")
    return await asyncio.create_subprocess_exec(
        sys.executable, str(LIFECYCLE), master, "team-a",
        str(c.store.secret_file("team-a")), json.dumps(tasks),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip


def quick_http_check(port: int) -> dict[str, Any]:
    """Mesos's HealthCheck JSON: a GET of / every second from the start; 2 failures kill."""
    return {
        "type": "HTTP", "http": {"port": port, "path": "/"}, "delay_seconds": 0,
        "interval_seconds": 1, "timeout_seconds": 1, "consecutive_failures": 2,
    }  # fmt: skip


# a task that finishes 1.5 s of work on SIGTERM, then leaves a mark; `ready` once trapping
GRACEFUL = (
    "trap 'sleep 1.5; echo graceful > done; exit 0' TERM; echo up > ready; "
    "while :; do sleep 0.05; done"
)


def graceful_task(task_id: str, grace: float) -> dict[str, Any]:
    """Mesos's TaskInfo JSON of a GRACEFUL task with a kill policy of `grace` seconds."""
    return {
        "task_id": {"value": task_id},
        "name": task_id,
        "command": {"value": GRACEFUL},
        "kill_policy": {"grace_period": {"nanoseconds": int(grace * 1e9)}},
    }


@pytest.mark.timing  # graces measured on the slave's clock
async def test_pymesos_sets_kill_policies_and_hears_task_killing(tmp_path: Path) -> None:
    """The task's kill policy (4 s, over the slave's 1 s) gives it time to finish; a KILL
    call's own (0.3 s) cuts another short; TASK_KILLING comes first (its capability)."""
    need_mosquitto()
    need_pymesos()
    reachable(tmp_path)
    slaves = [("slave-0", "--resources", "cpus:2;mem:1024", "--kill-grace", "1")]
    tasks = [graceful_task("graceful", 4), graceful_task("cut", 4)]
    async with secure_cluster(tmp_path, CLUSTER, PRINCIPALS[:3] + PRINCIPALS[4:], slaves) as c:
        process = await lifecycle(c, tasks)
        async with running(process) as fw:
            framework_id = (await fw.until("REGISTERED"))[1]
            sandboxes = tmp_path / "slave-0" / "sandboxes" / framework_id
            for task_id, kill in (("graceful", "KILL graceful\n"), ("cut", "KILL cut 0.3\n")):
                await fw.first("STATUS", task_id, "TASK_RUNNING")
                await eventually(lambda t=task_id: (sandboxes / t / "ready").exists())
                assert process.stdin is not None
                process.stdin.write(kill.encode())
                killing = await fw.first("STATUS", task_id, "TASK_KILLING")
                killed = await fw.first("STATUS", task_id, "TASK_KILLED")
                took = float(killed[5]) - float(killing[5])
                if task_id == "graceful":
                    assert 1.5 <= took < 3.0, took
                    assert (sandboxes / task_id / "done").exists()
                else:
                    assert 0.3 <= took < 1.2, took
                    assert not (sandboxes / task_id / "done").exists()


async def test_pymesos_sets_an_http_health_check_and_sees_its_task_killed(tmp_path: Path) -> None:
    """Mesos's HealthCheck in a TaskInfo: pymesos hears the task healthy, then unhealthy
    once its HTTP check fails, then TASK_KILLED (healthy false) after 2 failures."""
    need_mosquitto()
    need_pymesos()
    reachable(tmp_path)
    port = free_port()
    web = {
        "task_id": {"value": "web"},
        "name": "web",
        "command": {"value": http_server(port)},
        "health_check": quick_http_check(port),
    }  # fmt: skip
    slaves = [("slave-0", "--resources", "cpus:2;mem:1024", "--kill-grace", "1")]
    async with secure_cluster(tmp_path, CLUSTER, PRINCIPALS[:3] + PRINCIPALS[4:], slaves) as c:
        process = await lifecycle(c, [web])
        async with running(process) as fw:
            framework_id = (await fw.until("REGISTERED"))[1]
            health = "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED"
            await fw.first("STATUS", "web", "TASK_RUNNING", "true", health)
            sandbox = tmp_path / "slave-0" / "sandboxes" / framework_id / "web"
            await asyncio.to_thread((sandbox / "sick").touch)
            await fw.first("STATUS", "web", "TASK_RUNNING", "false", health)
            await fw.first("STATUS", "web", "TASK_KILLING", "false")  # (it asked to hear it)
            await fw.first("STATUS", "web", "TASK_KILLED", "false")


async def test_pymesos_sees_its_executors_task_health_checked_and_killed(tmp_path: Path) -> None:
    """A health check on a task of pymesos's own executor (MesosExecutorDriver, under
    drfmesos's adapter) is run by the executor's driver: pymesos hears the task healthy,
    then unhealthy once its HTTP check fails, then TASK_KILLING and TASK_KILLED (healthy
    false) after 2 failures, the executor's killTask having stopped it."""
    need_mosquitto()
    need_pymesos()
    reachable(tmp_path)
    port = free_port()
    serve = {"port": port, "healthy_for": 3}  # (200 to its first 3 GETs, 500 after)
    web = {
        "task_id": {"value": "web"},
        "name": "web",
        "executor": {
            "executor_id": {"value": "web"},
            "command": {"value": f'"$DRFMESOS_PYTHON" {WEB_EXECUTOR}'},
            "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
                          {"name": "mem", "type": "SCALAR", "scalar": {"value": 64}}],
        },
        "data": base64.b64encode(json.dumps(serve).encode()).decode(),
        "health_check": quick_http_check(port),
    }  # fmt: skip
    slaves = [("slave-0", "--resources", "cpus:2;mem:1024", *task_env_args())]
    async with secure_cluster(tmp_path, CLUSTER, PRINCIPALS[:3] + PRINCIPALS[4:], slaves) as c:
        process = await lifecycle(c, [web])
        async with running(process) as fw:
            await fw.until("REGISTERED")
            health = "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED"
            await fw.first("STATUS", "web", "TASK_RUNNING", "true", health)
            await fw.first("STATUS", "web", "TASK_RUNNING", "false", health)
            await fw.first("STATUS", "web", "TASK_KILLING", "false")  # (it asked to hear it)
            await fw.first("STATUS", "web", "TASK_KILLED", "false")


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
