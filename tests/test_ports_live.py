"""Done when (issue 49): a framework written against the SDK, and one against Mesos's v1
HTTP API (pymesos, unmodified), each run a small web service on a live secure cluster
(mosquitto with TLS, the master and two slaves as processes): several instances a slave,
each listening on the port its offer gave it (`$PORT0`), each answered over HTTP here;
the master's states show each task's port."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from cluster.local.secure import as_principal
from cluster.testing import reachable
from frameworks import (
    SchedulerDriver,
    ports_of,
)
from protocol.tooling.ports import free_port
from protocol.wire.messages import TaskState

from conftest import need_mosquitto
from harness.helpers import SecureCluster, basic, secure_cluster
from harness.pymesos import need_pymesos, running
from harness.slave import port_server

CLUSTER = "ports"
PRINCIPALS = [("master", "master"), ("ops", "operator"), ("slave-0", "slave"),
              ("slave-1", "slave"), ("team-a", "framework")]  # fmt: skip
PER_SLAVE = 3
PROGRAM = Path(__file__).parent / "programs" / "pymesos_ports.py"
EXAMPLE = Path(__file__).parent.parent / "examples" / "web_service.py"
pytestmark = pytest.mark.timeout(180)


def slaves(base: int) -> list[tuple[str, ...]]:
    """Two slaves on this one host: ports of their own, 10 each."""
    return [
        (
            f"slave-{i}",
            "--resources",
            f"cpus:2;mem:1024;ports:[{base + 10 * i}-{base + 10 * i + 9}]",
        )
        for i in range(2)
    ]


async def answer(port: int) -> str:
    """What the server on `port` answers (retried while it starts)."""
    async with aiohttp.ClientSession() as http:
        for _ in range(100):
            try:
                async with http.get(f"http://127.0.0.1:{port}/") as r:
                    return await r.text()
            except aiohttp.ClientConnectionError:
                await asyncio.sleep(0.1)
    raise AssertionError(f"nothing answers on port {port}")


async def classic_ports(c: SecureCluster) -> dict[str, str]:
    """Each live task's ports, as /master/state (Mesos's v0 shape) shows them."""
    auth = basic("ops", c.store.secret_file("ops").read_text().strip())
    async with (
        aiohttp.ClientSession() as http,
        http.get(c.web.rstrip("/") + "/master/state", headers={"Authorization": auth}) as r,
    ):
        state = await r.json()
    return {
        t["id"]: t["resources"].get("ports", "") for fw in state["frameworks"] for t in fw["tasks"]
    }


async def v1_call(c: SecureCluster, call: str) -> Any:
    """Mesos's operator API, as the operator."""
    auth = basic("ops", c.store.secret_file("ops").read_text().strip())
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            c.web.rstrip("/") + "/api/v1", json={"type": call}, headers={"Authorization": auth}
        ) as r,
    ):
        return (await r.json())[call.lower()]


def ranges_in(resources: list[dict[str, Any]]) -> list[dict[str, int]]:
    """The ports of Mesos's resources JSON: a RANGES resource, never a SCALAR one."""
    ports = [r for r in resources if r["name"] == "ports"]
    assert all(r["type"] == "RANGES" for r in ports), ports
    return [span for r in ports for span in r["ranges"]["range"]]


async def v1_ports(c: SecureCluster) -> dict[str, list[dict[str, int]]]:
    """Each live task's ports as Mesos's operator API (GET_TASKS) gives them: RANGES."""
    tasks = (await v1_call(c, "GET_TASKS"))["tasks"]
    return {t["task_id"]["value"]: ranges_in(t["resources"]) for t in tasks}


async def own_api_ports(c: SecureCluster) -> dict[str, dict[str, str]]:
    """Each live task's values as drfmesos's /api/v1/tasks gives them (the web UI's)."""
    auth = basic("ops", c.store.secret_file("ops").read_text().strip())
    async with (
        aiohttp.ClientSession() as http,
        http.get(c.web.rstrip("/") + "/api/v1/tasks", headers={"Authorization": auth}) as r,
    ):
        body = await r.json()
    return {t["task_id"]: t["discrete"] for t in body["tasks"]}


def web_service() -> Any:
    """examples/web_service.py, the how-to's framework, as a module."""
    spec = importlib.util.spec_from_file_location("web_service", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def until(web: Any, condition: Any, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            web.changed.clear()
            await web.changed.wait()


async def test_an_sdk_framework_runs_web_servers_on_the_ports_its_offers_gave(
    tmp_path: Path,
) -> None:
    need_mosquitto()
    reachable(tmp_path)
    base = free_port(20)
    async with secure_cluster(tmp_path, CLUSTER, PRINCIPALS, slaves(base)) as c:
        web = web_service().WebService(PER_SLAVE, bind="127.0.0.1")
        driver = SchedulerDriver(
            web,
            name="web",
            broker=as_principal(c.url, c.store, "team-a"),
            cluster=CLUSTER,
            role="team-a",
        )
        await driver.start(timeout=20)
        try:
            running = TaskState.RUNNING
            await until(web, lambda: list(web.states.values()).count(running) == 6, 60)
            ports = {tid: ports_of(t.discrete) for tid, t in web.tasks.items()}
            assert all(len(p) == 1 for p in ports.values())
            every = sorted(p[0] for p in ports.values())
            assert len(set(every)) == 2 * PER_SLAVE  # never one port twice
            assert all(base <= p < base + 20 for p in every)
            for tid, (port,) in ports.items():
                assert await answer(port) == str(port), tid
            shown = await classic_ports(c)
            assert {tid: shown[tid] for tid in ports} == {
                tid: f"[{p}-{p}]" for tid, (p,) in ports.items()
            }
            v1 = await v1_ports(c)
            assert {tid: v1[tid] for tid in ports} == {
                tid: [{"begin": p, "end": p}] for tid, (p,) in ports.items()
            }
            agents = (await v1_call(c, "GET_AGENTS"))["agents"]
            held = sorted(
                p
                for a in agents
                for s in ranges_in(a["allocated_resources"])
                for p in range(s["begin"], s["end"] + 1)
            )
            assert held == [p for (p,) in sorted(ports.values())]
            assert all(ranges_in(a["total_resources"]) for a in agents)
            own = await own_api_ports(c)
            assert {tid: own[tid] for tid in ports} == {
                tid: {"ports": f"[{p}-{p}]"} for tid, (p,) in ports.items()
            }
            # a task that ends gives its port back: its replacement is offered it (the
            # lowest free port of its slave) and serves on it
            gone = min(web.tasks, key=lambda t: ports[t][0])
            driver.kill_task(gone)
            await until(web, lambda: web.states[gone] == TaskState.KILLED, 30)
            await until(web, lambda: len(web.tasks) == 2 * PER_SLAVE + 1, 30)
            (new,) = set(web.tasks) - set(ports)
            assert ports_of(web.tasks[new].discrete) == ports[gone]
            await until(web, lambda: web.states.get(new) == running, 30)
            assert await answer(ports[gone][0]) == str(ports[gone][0])
        finally:
            await driver.stop()


LIVE = ("TASK_STAGING", "TASK_STARTING", "TASK_RUNNING")


def is_running(line: list[str]) -> bool:
    return line[:1] == ["STATUS"] and line[2] == "TASK_RUNNING"


async def test_a_pymesos_framework_runs_web_servers_on_the_ports_its_offers_gave(
    tmp_path: Path,
) -> None:
    need_mosquitto()
    need_pymesos()
    reachable(tmp_path)
    base = free_port(20)
    async with secure_cluster(tmp_path, CLUSTER, PRINCIPALS, slaves(base)) as c:
        master = c.web.split("//")[1].rstrip("/")
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(PROGRAM), master, "team-a",
            str(c.store.secret_file("team-a")), str(PER_SLAVE), port_server(),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with running(process) as fw:
            while sum(is_running(line) for line in fw.lines) < 2 * PER_SLAVE:
                await fw.until("STATUS", timeout=90)
            lines = fw.lines
            ended = [line for line in lines if line[:1] == ["STATUS"] and line[2] not in LIVE]
            assert not ended
            launched = {line[1]: int(line[3]) for line in lines if line[:1] == ["LAUNCHED"]}
            assert len(launched) == 2 * PER_SLAVE
            assert len(set(launched.values())) == 2 * PER_SLAVE
            for tid, port in launched.items():
                assert await answer(port) == str(port), tid
            shown = await classic_ports(c)
            assert {tid: shown[tid] for tid in launched} == {
                tid: f"[{p}-{p}]" for tid, p in launched.items()
            }
