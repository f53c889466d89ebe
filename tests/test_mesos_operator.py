"""Mesos's operator API (`POST /api/v1`, its SUBSCRIBE event stream) and the classic JSON
endpoints, spoken as the tools written against Mesos speak them: raw HTTP and RecordIO
read by hand, on a secured cluster (mosquitto with TLS, master and slaves as processes).
Bad input gets a 4xx with a JSON error and changes nothing."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest

from cluster.local.launcher import Launcher
from cluster.local.secure import as_principal
from cluster.local.view import operator_call, wait_state
from frameworks.driver import SchedulerDriver
from frameworks.samples.command import CommandScheduler
from master.books import Books, Framework, Slave, Task
from master.changes import Changes
from master.config import MasterInfo
from master.http.config import HttpConfig
from master.http.standby import StandbyHttp
from master.mesos_api.doors import STANDBY_PUBLIC_PATHS, standby_mesos_routes
from master.mesos_api.events import QUEUE, OperatorEvents, Subscriber
from protocol.recordio import Decoder
from protocol.tooling.brokers import BrokerURL
from protocol.tooling.credentials import Store
from protocol.transport.aio import within
from protocol.wire.messages import ClusterEvent, CommandInfo, MarkSlaveGone, TaskInfo, TaskState
from protocol.wire.resources import Resources

from conftest import need_mosquitto
from harness.helpers import basic, printer, secure_master

CLUSTER = "mesos-ops"
PRINCIPALS = [("master", "master"), ("ops", "operator"), ("slave-0", "slave"),
              ("slave-1", "slave"), ("printer", "framework")]  # fmt: skip
HEARTBEAT = 1.0  # the master's --heartbeat-interval here: the stream's too


@dataclass
class Ops:
    url: BrokerURL
    store: Store
    launcher: Launcher
    web: str  # the master's HTTP address
    work: Path

    def auth(self, name: str = "ops") -> str:
        return basic(name, self.store.secret_file(name).read_text().strip())

    async def call(
        self, body: bytes | dict[str, Any], auth: str | None = None, **headers: str
    ) -> tuple[int, Any]:
        """POST /api/v1 as a Mesos operator tool does."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {
            "Content-Type": "application/json",
            "Authorization": auth or self.auth(),
            **headers,
        }
        async with (
            aiohttp.ClientSession() as session,
            session.post(self.web + "api/v1", data=data, headers=headers) as r,
        ):
            text = await r.text()
            return r.status, json.loads(text) if text else None

    async def get(self, path: str, auth: str | None = None) -> tuple[int, Any, Any]:
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                self.web + path.lstrip("/"),
                headers={"Authorization": auth or self.auth()},
                allow_redirects=False,
            ) as r,
        ):
            text = await r.text()
            body = json.loads(text) if r.content_type == "application/json" and text else text
            return r.status, body, r.headers

    def printer(self, command: str, count: int) -> tuple[CommandScheduler, SchedulerDriver]:
        return printer(self.url, self.store, CLUSTER, command, count)

    async def slave(self, i: int) -> None:
        await self.launcher.start(
            "slave", f"slave-{i}", "--resources", "cpus:2;mem:1024",
            "--work-dir", str(self.work / f"slave-{i}"),
        )  # fmt: skip


@pytest.fixture
async def ops(tmp_path: Path) -> AsyncIterator[Ops]:
    need_mosquitto()
    heartbeat = ("--heartbeat-interval", str(HEARTBEAT))
    async with secure_master(tmp_path, CLUSTER, PRINCIPALS, *heartbeat) as (broker, store, run):
        live = Ops(broker.url, store, run, "", tmp_path)
        await live.slave(0)
        state = await wait_state(
            as_principal(broker.url, store, "ops"), CLUSTER, lambda s: len(s.slaves) == 1
        )
        live.web = state.web_ui
        yield live


@dataclass
class Stream:
    """An operator's event stream, read as RecordIO by hand."""

    response: aiohttp.ClientResponse
    events: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def read(self) -> None:
        decoder = Decoder()
        async for chunk in self.response.content.iter_any():
            for record in decoder.feed(chunk):
                assert b"\n" not in record  # one line of JSON each
                self.events.append((time.monotonic(), json.loads(record)))
                self.arrived.set()

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for _, e in self.events if e["type"] == kind]

    async def wait(self, condition: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            self.arrived.clear()
            left = deadline - time.monotonic()
            assert left > 0, [e["type"] for _, e in self.events]
            await within(self.arrived.wait(), left)


@pytest.mark.timing  # within a second
async def test_an_operator_stream_sees_every_change_within_a_second(ops: Ops) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            ops.web + "api/v1",
            json={"type": "SUBSCRIBE"},
            headers={"Authorization": ops.auth(), "Accept": "application/json"},
        ) as response,
    ):
        assert response.status == 200
        assert response.content_type == "application/recordio"
        stream = Stream(response)
        reader = asyncio.create_task(stream.read())
        try:
            await stream.wait(lambda: stream.events, 10)
            first = stream.events[0][1]
            assert first["type"] == "SUBSCRIBED"
            assert first["subscribed"]["heartbeat_interval_seconds"] == HEARTBEAT
            [agent] = first["subscribed"]["get_state"]["get_agents"]["agents"]
            assert agent["agent_info"]["hostname"]
            assert {r["name"] for r in agent["total_resources"]} >= {"cpus", "mem"}

            await ops.slave(1)  # a slave joins: AGENT_ADDED
            await stream.wait(lambda: stream.of("AGENT_ADDED"), 10)
            added = stream.of("AGENT_ADDED")[0]["agent_added"]["agent"]
            new_agent = added["agent_info"]["id"]["value"]
            assert new_agent != agent["agent_info"]["id"]["value"]

            # a framework runs three tasks to their end, then tears itself down
            printer, driver = ops.printer("sleep 0.2", 3)
            await driver.run()
            assert printer.ok
            done = time.monotonic()
            fw_id = driver.framework_id

            def finished() -> set[str]:
                return {
                    e["task_updated"]["status"]["task_id"]["value"]
                    for e in stream.of("TASK_UPDATED")
                    if e["task_updated"]["state"] == "TASK_FINISHED"
                }

            # what the framework heard from the master, the stream says within a second
            await stream.wait(lambda: len(finished()) == 3 and stream.of("FRAMEWORK_REMOVED"), 1)
            assert time.monotonic() - done < 1.0
            [fw_added] = stream.of("FRAMEWORK_ADDED")
            assert (
                fw_added["framework_added"]["framework"]["framework_info"]["id"]["value"] == fw_id
            )
            tasks = {e["task_added"]["task"]["task_id"]["value"] for e in stream.of("TASK_ADDED")}
            assert tasks == finished()
            for e in stream.of("TASK_ADDED"):
                assert e["task_added"]["task"]["framework_id"]["value"] == fw_id
            running = {
                e["task_updated"]["status"]["task_id"]["value"]
                for e in stream.of("TASK_UPDATED")
                if e["task_updated"]["state"] == "TASK_RUNNING"
            }
            assert running == tasks
            removed = stream.of("FRAMEWORK_REMOVED")[0]["framework_removed"]
            assert removed["framework_info"]["id"]["value"] == fw_id
            kinds = [e["type"] for _, e in stream.events]
            assert kinds.index("FRAMEWORK_ADDED") < kinds.index("TASK_ADDED")
            assert kinds.index("FRAMEWORK_REMOVED") == len(kinds) - 1 or "HEARTBEAT" in kinds

            # the stream's last word on each task is what GET_TASKS says now
            status, body = await ops.call({"type": "GET_TASKS"})
            assert status == 200
            told = {t["task_id"]["value"]: t["state"] for t in body["get_tasks"]["completed_tasks"]}
            assert told == dict.fromkeys(tasks, "TASK_FINISHED")

            # an operator says a slave is gone: AGENT_REMOVED, once
            error = await operator_call(
                as_principal(ops.url, ops.store, "ops"), CLUSTER,
                MarkSlaveGone(slave_id=new_agent),
                lambda e: e.kind == "slave-gone" and e.slave_id == new_agent,
            )  # fmt: skip
            assert error is None
            await stream.wait(lambda: stream.of("AGENT_REMOVED"), 1)
            [gone] = stream.of("AGENT_REMOVED")
            assert gone["agent_removed"]["agent_id"]["value"] == new_agent

            # a quiet stream still says it is alive, at the interval it announced
            quiet = len(stream.events)
            await stream.wait(
                lambda: any(e["type"] == "HEARTBEAT" for _, e in stream.events[quiet:]),
                HEARTBEAT * 3,
            )
            assert len(stream.of("AGENT_REMOVED")) == 1
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)


async def test_operator_calls_answer_as_mesos_and_refuse_bad_input(ops: Ops) -> None:
    for kind, key in [
        ("GET_HEALTH", "get_health"), ("GET_VERSION", "get_version"), ("GET_STATE", "get_state"),
        ("GET_FRAMEWORKS", "get_frameworks"), ("GET_AGENTS", "get_agents"),
        ("GET_TASKS", "get_tasks"), ("GET_ROLES", "get_roles"), ("GET_WEIGHTS", "get_weights"),
        ("GET_QUOTA", "get_quota"), ("GET_EXECUTORS", "get_executors"),
        ("GET_METRICS", "get_metrics"),
    ]:  # fmt: skip
        status, body = await ops.call({"type": kind})
        assert status == 200, (kind, body)
        assert body["type"] == kind
        assert key in body, body
    status, body = await ops.call({"type": "GET_HEALTH"})
    assert body["get_health"] == {"healthy": True}
    status, body = await ops.call({"type": "GET_VERSION"})
    assert body["get_version"]["version_info"]["version"].startswith("1.")
    status, body = await ops.call({"type": "GET_MASTER"})
    assert body["get_master"]["master_info"]["address"]["port"] == int(ops.web.split(":")[-1][:-1])
    status, body = await ops.call({"type": "GET_AGENTS"})
    assert len(body["get_agents"]["agents"]) == 1
    status, body = await ops.call({"type": "GET_METRICS"})
    metrics = {m["name"]: m["value"] for m in body["get_metrics"]["metrics"]}
    _, snapshot, _ = await ops.get("/metrics/snapshot")
    assert metrics["master/slaves_active"] == snapshot["master/slaves_active"] == 1

    # UPDATE_WEIGHTS goes through the operators' SetWeights: GET_WEIGHTS and /weights see it
    update = {"type": "UPDATE_WEIGHTS",
              "update_weights": {"weight_infos": [{"role": "printer", "weight": 3.0}]}}  # fmt: skip
    status, body = await ops.call(update)
    assert status == 200, body

    async def weights() -> dict[str, float]:
        _, body = await ops.call({"type": "GET_WEIGHTS"})
        return {w["role"]: w["weight"] for w in body["get_weights"]["weight_infos"]}

    assert (await weights())["printer"] == 3.0
    status, classic, _ = await ops.get("/master/weights")
    assert {"role": "printer", "weight": 3.0} in classic

    # bad input: a clear 4xx with a JSON error, and nothing changed
    printer, wrong = ops.auth("printer"), basic("ops", "not-the-secret")

    def weights_call(*infos: dict[str, Any]) -> dict[str, Any]:
        return {"type": "UPDATE_WEIGHTS", "update_weights": {"weight_infos": list(infos)}}

    huge = b'{"type": "GET_STATE", "pad": "' + b"x" * (2 << 20) + b'"}'
    refusals: list[tuple[int, bytes | dict[str, Any], dict[str, str]]] = [
        (400, b'{"type": "GET_STATE"', {}),  # malformed JSON
        (400, b"[1, 2]", {}),  # not a call
        (400, {"type": "NO_SUCH_CALL"}, {}),
        (501, {"type": "GET_OPERATIONS"}, {}),  # Mesos's, not served here
        (400, {"type": "GROW_VOLUME", "grow_volume": {"agent_id": {"value": "s0"}}}, {}),
        (
            400,
            {
                "type": "SHRINK_VOLUME",
                "shrink_volume": {
                    "agent_id": {"value": "s0"},
                    "volume": {"name": "disk", "type": "SCALAR", "scalar": {"value": 1}},
                    "subtract": {"value": 1},
                },
            },
            {},
        ),  # (not a volume)
        (400, {"type": "RESERVE_RESOURCES"}, {}),  # served, and says what it lacks
        (415, {"type": "GET_STATE"}, {"Content-Type": "application/x-protobuf"}),
        (400, weights_call({"role": "printer", "weight": -1}), {}),
        (400, weights_call({"role": "printer", "weight": 2}, {"role": "a//b", "weight": 2}), {}),
        (413, huge, {}),
        (403, weights_call({"role": "printer", "weight": 2}), {"Authorization": printer}),
        (401, weights_call({"role": "printer", "weight": 2}), {"Authorization": wrong}),
        (403, {"type": "SUBSCRIBE"}, {"Authorization": printer}),
    ]
    for expected, body_sent, headers in refusals:
        status, answer = await ops.call(body_sent, **headers)
        assert status == expected, (str(body_sent)[:80], answer)
        assert answer["error"], answer
    assert (await weights())["printer"] == 3.0


async def test_quota_teardown_and_mark_agent_gone_through_the_operator_api(ops: Ops) -> None:
    """Mesos's UPDATE_QUOTA (all or none), SET_QUOTA and REMOVE_QUOTA, TEARDOWN and
    MARK_AGENT_GONE, each through the bus's own handler: what GET_QUOTA, GET_FRAMEWORKS
    and GET_AGENTS say after them, and a 400 that changes nothing for what cannot be."""

    def config(role: str, guarantees: dict[str, float], **limits: float) -> dict[str, Any]:
        out: dict[str, Any] = {"role": role}
        out["guarantees"] = {name: {"value": v} for name, v in guarantees.items()}
        if limits:
            out["limits"] = {name: {"value": v} for name, v in limits.items()}
        return out

    def update(*configs: dict[str, Any]) -> dict[str, Any]:
        return {"type": "UPDATE_QUOTA", "update_quota": {"quota_configs": list(configs)}}

    async def quotas() -> dict[str, dict[str, Any]]:
        _, body = await ops.call({"type": "GET_QUOTA"})
        return {c["role"]: c for c in body["get_quota"]["status"]["configs"]}

    status, body = await ops.call(
        update(config("eng", {"cpus": 1}, cpus=2), config("eng/web", {"cpus": 0.5}))
    )
    assert status == 200, body
    assert (await quotas())["eng"]["limits"] == {"cpus": {"value": 2.0}}
    assert (await quotas())["eng/web"]["guarantees"] == {"cpus": {"value": 0.5}}
    # all or none: eng's guarantee below its sub-role's refuses ops' too
    status, body = await ops.call(update(config("ops", {"cpus": 1}), config("eng", {"cpus": 0.2})))
    assert status == 400
    assert "exceed their parent eng's" in body["error"]
    assert set(await quotas()) == {"eng", "eng/web"}
    for bad in (
        update(config("ops", {"cpus": -1})),
        update(config("ops", {"cpus": 1}), config("ops", {"mem": 1})),
        {"type": "UPDATE_QUOTA", "update_quota": {"quota_configs": "eng"}},
    ):
        status, body = await ops.call(bad)
        assert status == 400, (bad, body)
    # the older calls: SET_QUOTA's guarantee is its limit too, for a role without one
    cpus = [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1}}]
    set_ops = {
        "type": "SET_QUOTA",
        "set_quota": {"quota_request": {"role": "ops", "guarantee": cpus}},
    }
    assert (await ops.call(set_ops))[0] == 200
    assert (await quotas())["ops"]["limits"] == {"cpus": {"value": 1.0}}
    assert (await ops.call(set_ops))[0] == 400  # (it has one: UPDATE_QUOTA changes it)
    remove = {"type": "REMOVE_QUOTA", "remove_quota": {"role": "ops"}}
    assert (await ops.call(remove))[0] == 200
    assert "ops" not in await quotas()
    assert (await ops.call(remove))[0] == 400
    # empty guarantees and limits (Mesos's empty maps): no quota, as none given
    clear = update({"role": "eng/web", "guarantees": {}, "limits": {}})
    assert (await ops.call(clear))[0] == 200
    assert "eng/web" not in await quotas()

    # TEARDOWN: the framework goes, its task with it
    _, driver = ops.printer("sleep 300", 1)
    await driver.start()
    try:
        as_ops = as_principal(ops.url, ops.store, "ops")
        await wait_state(
            as_ops, CLUSTER, lambda s: any(t.state.value == "TASK_RUNNING" for t in s.tasks)
        )
        teardown = {
            "type": "TEARDOWN",
            "teardown": {"framework_id": {"value": driver.framework_id}},
        }
        assert (await ops.call(teardown))[0] == 200
        await wait_state(as_ops, CLUSTER, lambda s: not s.frameworks and not s.tasks)
        assert (await ops.call(teardown))[0] == 400  # (no framework of that id now)
    finally:
        await driver.stop()
    # MARK_AGENT_GONE: the slave is gone for good
    _, body = await ops.call({"type": "GET_AGENTS"})
    [agent] = body["get_agents"]["agents"]
    agent_id = agent["agent_info"]["id"]["value"]
    gone = {"type": "MARK_AGENT_GONE", "mark_agent_gone": {"agent_id": {"value": agent_id}}}
    assert (await ops.call(gone))[0] == 200
    await wait_state(as_ops, CLUSTER, lambda s: not s.slaves)
    unknown = {"type": "MARK_AGENT_GONE", "mark_agent_gone": {"agent_id": {"value": "nobody"}}}
    assert (await ops.call(unknown))[0] == 400


async def test_the_classic_endpoints_answer_with_mesos_field_names(ops: Ops) -> None:
    _, driver = ops.printer("sleep 300", 1)
    await driver.start()
    try:
        await wait_state(
            as_principal(ops.url, ops.store, "ops"),
            CLUSTER,
            lambda s: any(t.state.value == "TASK_RUNNING" for t in s.tasks),
        )
        fw_id = driver.framework_id
        bodies = []
        for path in ("/master/state", "/state", "/state.json", "/master/state/?_ts=1732540000"):
            status, body, _ = await ops.get(path)
            assert status == 200, (path, body)
            bodies.append(body)
        state = bodies[0]
        assert {b["id"] for b in bodies} == {state["id"]}
        assert state["activated_slaves"] == 1
        assert state["leader_info"]["pid"] == state["pid"] == state["leader"]
        [fw] = state["frameworks"]
        assert (fw["id"], fw["name"], fw["role"], fw["active"]) == (
            fw_id,
            "printer",
            "printer",
            True,
        )
        [task] = fw["tasks"]
        assert (task["state"], task["framework_id"]) == ("TASK_RUNNING", fw_id)
        assert task["resources"] == {"cpus": 0.5, "mem": 64.0}
        assert fw["used_resources"]["cpus"] == 0.5
        [slave] = state["slaves"]
        assert slave["resources"]["cpus"] == 2.0
        assert slave["pid"] == f"slave(1)@{slave['hostname']}:5051"  # the CLI's exec reads it
        assert slave["used_resources"]["cpus"] == 0.5
        assert task["slave_id"] == slave["id"]

        # the summary: counts by state, who runs where, no task itself (the Mesos UI's)
        for path in ("/master/state-summary", "/state-summary/"):
            status, summary, _ = await ops.get(path)
            assert status == 200, (path, summary)
        [sum_fw], [sum_slave] = summary["frameworks"], summary["slaves"]
        assert (sum_fw["id"], sum_fw["TASK_RUNNING"], sum_fw["TASK_FINISHED"]) == (fw_id, 1, 0)
        assert "tasks" not in sum_fw
        assert sum_fw["slave_ids"] == [slave["id"]]
        assert (sum_slave["id"], sum_slave["TASK_RUNNING"]) == (slave["id"], 1)
        assert sum_slave["framework_ids"] == [fw_id]
        assert sum_slave["used_resources"]["cpus"] == 0.5

        for path, key in [("/master/frameworks", "frameworks"), ("/frameworks/", "frameworks"),
                          ("/master/slaves", "slaves"), ("/slaves", "slaves"),
                          ("/master/tasks", "tasks"), ("/tasks?_ts=1", "tasks"),
                          ("/master/roles", "roles"), ("/roles/", "roles")]:  # fmt: skip
            status, body, _ = await ops.get(path)
            assert status == 200, (path, body)
            assert body[key], (path, body)
        status, body, _ = await ops.get("/master/tasks?limit=1&offset=0&order=asc")
        assert [t["id"] for t in body["tasks"]] == [task["id"]]
        assert (await ops.get("/master/tasks?offset=1"))[1] == {"tasks": []}
        # as Mesos reads the query, and the `mesos` CLI (avmesos-cli) sends it
        everything = [task["id"]]
        for query, ids in [("order=asc&limit=-1", everything), ("order=sideways", everything),
                           ("limit=x", everything), ("offset=-1&limit=5", everything),
                           ("limit=0", []), (f"framework_id={fw_id}", everything),
                           ("framework_id=fw-other", []), (f"task_id={task['id']}", everything),
                           ("task_id=nope", [])]:  # fmt: skip
            status, body, _ = await ops.get(f"/master/tasks?{query}")
            assert status == 200, (query, body)
            assert [t["id"] for t in body["tasks"]] == ids, query
        status, roles, _ = await ops.get("/master/roles")
        printer_role = next(r for r in roles["roles"] if r["name"] == "printer")
        assert printer_role["frameworks"] == [fw_id]
        assert (await ops.get("/master/weights"))[0] == 200
        status, quota, _ = await ops.get("/master/quota")
        assert status == 200
        assert quota["infos"] == []
        assert (await ops.get("/master/health"))[0] == 200
        status, _, headers = await ops.get("/master/redirect")
        assert status == 307
        assert headers["Location"] == "//" + ops.web.split("//")[1].rstrip("/")

        status, metrics, _ = await ops.get("/metrics/snapshot")
        assert status == 200
        assert metrics["master/elected"] == 1
        assert metrics["master/cpus_total"] == 2.0
        assert metrics["master/cpus_used"] >= 0.5
        assert metrics["master/tasks_running"] == 1
        assert metrics["master/frameworks_active"] == 1
        assert metrics["allocator/mesos/allocation_runs"] > 0
        assert "allocator/mesos/roles/printer/shares/dominant" in metrics

        # operators only, as every other endpoint of the master
        for path in (
            "/master/state",
            "/master/state-summary",
            "/metrics/snapshot",
            "/master/redirect",
        ):
            assert (await ops.get(path, auth=basic("ops", "wrong")))[0] == 401
            assert (await ops.get(path, auth=ops.auth("printer")))[0] == 403
    finally:
        driver.stop()
        await driver.join()


async def test_a_standby_redirects_to_the_leader() -> None:
    leader = "127.0.0.1:5999"

    async def where() -> str:
        return leader

    config = HttpConfig(port=0, credentials=None)
    routes = standby_mesos_routes(where)  # as master.cli builds a standby
    standby = StandbyHttp(config, "master-standby", where, routes, STANDBY_PUBLIC_PATHS)
    await standby.start()
    assert standby.runner is not None
    port = next(iter(standby.runner.addresses))[1]
    try:
        async with aiohttp.ClientSession() as session:
            for path in ("/master/redirect", "/redirect/", "/master/redirect?_ts=1"):
                async with session.get(
                    f"http://127.0.0.1:{port}{path}", allow_redirects=False
                ) as r:
                    assert r.status == 307
                    assert r.headers["Location"] == "//" + leader
            leader = ""  # between two leaders
            async with session.get(f"http://127.0.0.1:{port}/master/redirect") as r:
                assert r.status == 503
                assert (await r.json())["error"]
    finally:
        await standby.stop()


async def test_a_slow_subscriber_is_closed_and_its_backlog_dropped() -> None:
    """A reader that stops reading holds at most QUEUE records, then is closed: the
    master's memory does not grow with it."""
    master = stub_master()
    master.books.slaves["s1"] = Slave("s1", "node", "host", Resources(cpus=1), {}, "", 0.0)
    events = OperatorEvents(master)
    slow = events.open("ops")
    assert master.changes.tasks_wanted
    for _ in range(QUEUE + 10):
        master.changes.emit(ClusterEvent(kind="slave-added", slave_id="s1"))
    assert slow not in events.subscribers
    assert "behind" in slow.why
    assert slow.queue.qsize() == 1
    assert slow.queue.get_nowait() == b""
    assert not master.changes.tasks_wanted  # nobody listens: the master builds nothing


def stub_master() -> Any:
    """What the operator stream reads of a master, and nothing else: no bus, no loop."""
    return SimpleNamespace(
        info=MasterInfo("m", 1, heartbeat_interval=5.0),
        books=Books(),
        changes=Changes(),
        allocator=SimpleNamespace(
            free=lambda _s: Resources(cpus=1), allocation=lambda _f: Resources(cpus=0.5)
        ),
    )


def records(sub: Subscriber) -> list[dict[str, Any]]:
    out = []
    while not sub.queue.empty():
        [record] = Decoder().feed(sub.queue.get_nowait())
        out.append(json.loads(record))
    return out


async def test_a_task_adopted_with_its_framework_comes_after_the_framework() -> None:
    """A framework that re-subscribes after a failover adopts the tasks its slaves brought
    back before it is said subscribed: the stream still names the framework first."""
    master = stub_master()
    events = OperatorEvents(master)
    sub = events.open("ops")
    assert [e["type"] for e in records(sub)] == ["SUBSCRIBED"]
    fw = Framework("f1", "printer", "printer", "printer", "in", "", 0.0, 0.0)
    command = CommandInfo(value="sleep 9")
    info = TaskInfo(task_id="t1", slave_id="s1", resources=Resources(cpus=0.5), command=command)
    fw.tasks["t1"] = Task(info, "f1", "s1", TaskState.RUNNING)
    master.books.frameworks["f1"] = fw
    master.changes.emit(ClusterEvent(kind="task-added", framework_id="f1", task_id="t1"))
    master.changes.emit(ClusterEvent(kind="subscribed", framework_id="f1"))
    told = records(sub)
    assert [e["type"] for e in told] == ["FRAMEWORK_ADDED", "TASK_ADDED", "FRAMEWORK_UPDATED"]
    task = told[1]["task_added"]["task"]
    assert (task["task_id"], task["state"]) == ({"value": "t1"}, "TASK_RUNNING")
    events.close_all()


def test_get_state_and_get_executors_hide_what_master_state_hides() -> None:
    """A task's environment and command (where a tenant keeps its secrets) are in neither
    the classic /master/state nor, now, v1 GET_STATE and GET_EXECUTORS (the executor's
    command, with its environment, was in both)."""
    from master.mesos_api.classic import framework_v0
    from master.mesos_api.json_stream import dumps
    from master.mesos_api.operator_state import get_executors, get_state
    from protocol.wire.messages import ExecutorInfo

    master = stub_master()
    fw = Framework("f1", "printer", "printer", "printer", "in", "", 0.0, 0.0)
    secret = "hunter2-of-the-printer"
    command = CommandInfo(value=f"run --token {secret}", environment={"TOKEN": secret})
    executor = ExecutorInfo(executor_id="e1", command=command, resources=Resources(cpus=0.1))
    info = TaskInfo(task_id="t1", slave_id="s1", resources=Resources(cpus=0.5), executor=executor)
    fw.tasks["t1"] = Task(info, "f1", "s1", TaskState.RUNNING)
    master.books.frameworks["f1"] = fw
    [shown] = get_executors(master)["executors"]
    assert shown["executor_info"]["executor_id"] == {"value": "e1"}
    assert shown["executor_info"]["framework_id"] == {"value": "f1"}
    for view in (get_state(master), get_executors(master), framework_v0(master, fw)):
        assert secret not in dumps(view)
