"""The master's HTTP API on a secure cluster (credentials, the broker's ACL, a framework
through the SDK): every answer validates against the OpenAPI description, operators only,
/metrics parses and agrees with the event stream, task files are read from the slave, and
the live feed sends changes. The API is tested on a master and slaves in process (the
memory transport with the store's ACL, HTTP on a real socket, tasks as processes); the
hello example runs as its docstring says on a live one (mosquitto with TLS, master and
slaves as processes)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from jsonschema import Draft202012Validator
from prometheus_client.parser import text_string_to_metric_families

from cluster.local.secure import provision
from frameworks.driver import SchedulerDriver
from frameworks.errors import DriverError
from frameworks.samples.command import CommandScheduler
from frameworks.scheduler import Scheduler
from master.cli import rate_limits
from master.http.config import HttpConfig
from master.master import Master, MasterConfig
from master.rate_limits import DEFAULT_CAPACITY, DEFAULT_QPS
from protocol.tooling.credentials import Store
from protocol.transport.aio import within
from protocol.transport.base import Connector
from protocol.transport.memory import MemoryBroker
from protocol.wire.messages import ClusterEvent, State, WatchEvents, Wire
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics
from slave.config import SlaveConfig
from slave.slave import Slave

from conftest import need_mosquitto
from harness.helpers import (
    basic,
    eventually,
    open_transport,
    secure_cluster,
    start_master,
    state_when,
    until,
)

CLUSTER = "http"
PRINCIPALS = [("master", "master"), ("ops", "operator"), ("slave-0", "slave"),
              ("slave-1", "slave"), ("printer", "framework"),
              ("watcher", "operator"), ("intruder", "framework"),
              ("team-a", "framework")]  # fmt: skip


@dataclass
class Live:
    store: Store
    web: str  # the master's HTTP address
    auth: str  # the operator's Authorization header
    master: Master | None = None  # in process (or None: a live cluster)
    memory: MemoryBroker | None = None

    def connect(self, name: str) -> Connector:
        assert self.memory is not None
        return self.memory.connector(name)

    def printer(self, command: str, count: int = 1) -> tuple[CommandScheduler, SchedulerDriver]:
        """The `printer` principal's framework, running `command` in `count` small tasks."""
        scheduler = CommandScheduler(
            "printer", command, count, Resources(cpus=0.5, mem=64), echo=lambda _: None
        )
        driver = SchedulerDriver(
            scheduler, name="printer", broker=self.connect("printer"), cluster=CLUSTER,
            role="printer",
        )  # fmt: skip
        return scheduler, driver

    async def state(self, condition: Callable[[State], bool]) -> State:
        """The master's state once `condition` holds of it."""
        assert self.master is not None
        return await state_when(self.master, condition)

    async def get(self, path: str, auth: str | None = None) -> tuple[int, Any]:
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                self.web + path.lstrip("/"), headers={"Authorization": auth or self.auth}
            ) as r,
        ):
            body = await r.text()
            is_json = r.content_type == "application/json"
            return r.status, json.loads(body) if is_json else body


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[Live]:
    """What `drfmesos master --http --principals` and two slaves (2 CPUs, 1 GB, racks r0
    and r1) are, in process on the memory transport with the store's ACL."""
    store = provision(tmp_path / "auth", PRINCIPALS)
    broker, topics = MemoryBroker(store.principals.values()), Topics(CLUSTER)
    config = MasterConfig(
        allocation_interval=0.1,
        principals=store.principals_file,
        rate_limits=rate_limits(None, DEFAULT_QPS, DEFAULT_CAPACITY),
        http=HttpConfig(port=0, credentials=store.path),
    )
    async with contextlib.AsyncExitStack() as stack:
        master = await start_master(stack, broker.connector("master"), topics, config)
        for i in range(2):
            name = f"slave-{i}"
            slave_bus = await open_transport(
                stack,
                broker.connector(name),
                name,
                inbox=topics.outbox("slave", name),
                will=(topics.gone("slave", name), "slave", name),
            )
            slave_config = SlaveConfig(
                name, name, Resources(cpus=2, mem=1024), tmp_path / name,
                attributes={"rack": f"r{i}"}, cluster=CLUSTER,
            )  # fmt: skip
            slave = Slave(slave_bus, topics, slave_config)
            await slave.start()
            stack.push_async_callback(functools.partial(slave.stop, kill_tasks=True))
        # as an operator would see it: a published state with both slaves (which the
        # live feed starts from too)
        published: list[State] = []

        async def on_state(message: Wire, _r: str | None) -> None:
            if isinstance(message, State):
                published.append(message)

        ops = await open_transport(stack, broker.connector("ops"), "ops")
        await ops.subscribe(topics.state, on_state)
        await eventually(lambda: any(len(s.slaves) == 2 for s in published) and bool(master.web_ui))
        secret = store.secret_file("ops").read_text().strip()
        yield Live(store, master.web_ui, basic("ops", secret), master, broker)


def validator(doc: dict[str, Any], path: str) -> Draft202012Validator:
    ref = doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    return Draft202012Validator({**ref, "components": doc["components"]})


async def test_the_api_answers_operators_only_and_as_its_openapi_says(live: Live) -> None:
    # the event stream is read as a principal of its own (a principal is one connection)
    watcher = live.connect("watcher")
    events: list[ClusterEvent] = []
    event_arrived = asyncio.Event()

    async def on_event(message: Wire, _r: str | None) -> None:
        if isinstance(message, ClusterEvent):
            events.append(message)
            event_arrived.set()

    async with watcher(name="event-reader", inbox=None, will=None) as bus:
        await bus.subscribe(Topics(CLUSTER).events, on_event)
        # the stream goes out while an operator watches (a lease, longer than the test)
        await bus.publish(Topics(CLUSTER).inbound("operator", "watcher"), WatchEvents(seconds=600))
        printer, driver = live.printer("echo hello from $MESOS_SANDBOX; echo oops >&2", 4)
        await driver.run()  # until its 4 tasks are done; then it tears itself down
        assert printer.ok
        await live.state(lambda s: not s.frameworks and s.offer_count == 0)

        status, doc = await live.get("/api/v1/openapi.json")
        assert status == 200
        fw_id = driver.framework_id
        task_id = next(iter(printer.results))
        # the framework was torn down: its tasks are gone from the books; ask while it runs
        # elsewhere (below). Here, every listing validates.
        for path, query in [
            ("/api/v1/state", ""),
            ("/api/v1/frameworks", ""),
            ("/api/v1/slaves", "?offset=1&limit=1"),
            ("/api/v1/tasks", "?state=TASK_FINISHED"),
            ("/api/v1/offers", "?limit=5"),
            ("/api/v1/roles", ""),
            ("/api/v1/limits", ""),
            ("/api/v1/events", ""),
            ("/health", ""),
        ]:
            status, body = await live.get(path + query)
            assert status == 200, (path, body)
            errors = list(validator(doc, path).iter_errors(body))
            assert not errors, (path, errors[:3])
            wrong = basic("ops", "not-the-secret")
            assert (await live.get(path, auth=wrong))[0] == 401
            assert (await live.get(path, auth=basic("printer", "x")))[0] == 401
        # the leader names itself as a standby names it: HOST:PORT, not a URL
        status, health = await live.get("/health")
        assert health["leader"] == live.web.split("//")[1].rstrip("/")
        assert health["leader"].startswith("127.0.0.1:")
        # a framework that is gone leaves its tasks behind (Mesos's completed frameworks)
        status, done = await live.get("/api/v1/tasks?state=TASK_FINISHED")
        assert done["total"] == 4
        assert {t["framework_id"] for t in done["tasks"]} == {fw_id}
        for t in done["tasks"]:  # when each ran, by the wall clock
            assert 0 < t["launched_at"] <= t["ended_at"] <= time.time()
        # and the framework itself is listed as completed: when and why it went
        status, listed = await live.get("/api/v1/frameworks")
        assert listed["frameworks"] == []
        [gone] = listed["completed_frameworks"]
        assert (gone["framework_id"], gone["name"], gone["active"]) == (fw_id, "printer", False)
        assert gone["finished_tasks"] == 4
        assert 0 < gone["registered_at"] <= gone["removed_at"] <= time.time()
        assert gone["removed_why"]
        # searched by id, sorted by launch
        status, one = await live.get(f"/api/v1/tasks?search={task_id}")
        assert [t["task_id"] for t in one["tasks"]] == [task_id]
        status, newest = await live.get("/api/v1/tasks?state=TASK_FINISHED&sort=-launched")
        launched = [t["launched_at"] for t in newest["tasks"]]
        assert launched == sorted(launched, reverse=True)
        assert (await live.get("/api/v1/tasks?sort=nope"))[0] == 400
        status, page = await live.get("/api/v1/slaves?offset=1&limit=1")
        assert page["total"] == 2
        assert len(page["slaves"]) == 1
        assert page["slaves"][0]["attributes"] in ({"rack": "r0"}, {"rack": "r1"})
        assert (await live.get("/api/v1/tasks?state=NOPE"))[0] == 400
        assert (await live.get("/api/v1/slaves?limit=0"))[0] == 400
        assert (await live.get("/metrics", auth=basic("ops", "no")))[0] == 401
        assert fw_id
        assert task_id

        # /metrics parses, and its counters are the event stream's (which is sent in
        # batches a few milliseconds behind: wait for it to catch up with the counters)
        status, text = await live.get("/metrics")
        assert status == 200
        families = {f.name: f for f in text_string_to_metric_families(text)}
        offers = {s.labels["outcome"]: s.value for s in families["drfmesos_offers"].samples
                  if s.name == "drfmesos_offers_total"}  # fmt: skip

        def streamed() -> dict[str, float]:
            seen = Counter(e.kind for e in events)
            return {
                "made": seen["offer"],
                "accepted": seen["accept"],
                "declined": seen["decline"],
                "rescinded": seen["rescind"],
            }

        await until(event_arrived, lambda: streamed() == offers, timeout=10)
        seen = Counter(e.kind for e in events)
        ended = Counter(e.state.value for e in events if e.kind == "release" and e.state)
        assert offers["made"] > 0
        launched = families["drfmesos_tasks_launched"].samples[0].value
        assert launched == seen["launch"] == 4
        by_state = {s.labels["state"]: s.value for s in families["drfmesos_tasks_ended"].samples
                    if s.name == "drfmesos_tasks_ended_total"}  # fmt: skip
        assert by_state == dict(ended)
        assert by_state["TASK_FINISHED"] == 4
        assert families["drfmesos_allocation_round_seconds"].samples

        # the rate limits: the master's defaults, and the printer's calls under them
        status, limits = await live.get("/api/v1/limits")
        printer_limit = next(p for p in limits["principals"] if p["principal"] == "printer")
        assert printer_limit["qps"] == limits["default"]["qps"] > 0
        assert printer_limit["handled"] > 0
        assert printer_limit["throttled"] == printer_limit["refused"] == 0
        held = {s.labels["principal"]: s.value for s in families["drfmesos_calls_throttled"].samples
                if s.name == "drfmesos_calls_throttled_total"}  # fmt: skip
        assert held["printer"] == 0


async def test_a_tasks_stdout_and_stderr_come_from_its_slave(live: Live) -> None:
    _, driver = live.printer("echo hello from the sandbox; echo oops >&2; sleep 300")
    await driver.start()
    try:
        state = await live.state(lambda s: any(t.state.value == "TASK_RUNNING" for t in s.tasks))
        task = state.tasks[0]
        base = f"/api/v1/tasks/{task.framework_id}/{task.task_id}/files"
        status, doc = await live.get("/api/v1/openapi.json")
        check = validator(doc, "/api/v1/tasks/{framework_id}/{task_id}/files/{name}")
        for name, text in (("stdout", "hello from the sandbox\n"), ("stderr", "oops\n")):
            deadline = asyncio.get_running_loop().time() + 10
            while True:  # the shell writes as it runs: read until its line is there
                status, body = await live.get(f"{base}/{name}")
                assert status == 200, body
                if text in body["data"] or asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(0.1)
            assert text in body["data"]
            assert not list(check.iter_errors(body))
        status, part = await live.get(f"{base}/stdout?offset=6&length=4")
        assert part["data"] == "from"
        assert (await live.get(f"{base}/passwd"))[0] == 404
        assert (await live.get(f"/api/v1/tasks/{task.framework_id}/nope/files/stdout"))[0] == 404
        assert (await live.get("/api/v1/tasks/../../files/stdout"))[0] == 404
        assert (await live.get(f"{base}/stdout", auth=basic("ops", "no")))[0] == 401
    finally:
        driver.stop()
        await driver.join()


class Refused(Scheduler):
    def __init__(self) -> None:
        self.errors: list[str] = []

    async def error(self, driver: SchedulerDriver, message: str) -> None:
        self.errors.append(message)


async def test_a_framework_reads_its_own_tasks_files_and_nobody_elses(live: Live) -> None:
    """As its own principal: over HTTP and through its driver. Another framework principal
    is refused both ways, and a framework principal may read nothing else over HTTP."""
    _, driver = live.printer("echo hello from the sandbox; sleep 300")
    await driver.start()
    refused = Refused()
    intruder = SchedulerDriver(
        refused, name="intruder", broker=live.connect("intruder"),
        cluster=CLUSTER,
    )  # fmt: skip
    await intruder.start()
    try:
        state = await live.state(lambda s: any(
            t.state.value == "TASK_RUNNING" and t.framework_id == driver.framework_id
            for t in s.tasks))  # fmt: skip
        task = next(t for t in state.tasks if t.framework_id == driver.framework_id)
        deadline = asyncio.get_running_loop().time() + 10
        while True:  # the shell writes as it runs: read until its line is there
            got = await driver.read_file(task.task_id, "stdout")
            if got.data or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.1)
        assert got.data == b"hello from the sandbox\n"
        assert got.size == len(got.data)
        part = await driver.read_file(task.task_id, "stdout", offset=6, length=4)
        assert (part.data, part.offset) == (b"from", 6)
        with pytest.raises(DriverError, match="no task nope"):
            await driver.read_file("nope")

        url = f"/api/v1/tasks/{task.framework_id}/{task.task_id}/files/stdout"
        own = basic("printer", live.store.secret_file("printer").read_text().strip())
        status, body = await live.get(url, auth=own)
        assert status == 200, body
        assert body["data"] == "hello from the sandbox\n"
        for path in ("/api/v1/state", "/api/v1/tasks", "/metrics"):
            assert (await live.get(path, auth=own))[0] == 403
        other = basic("intruder", live.store.secret_file("intruder").read_text().strip())
        status, body = await live.get(url, auth=other)
        assert status == 403
        assert body == {"error": "not a task of one of your frameworks"}

        # the intruder's driver naming the printer's framework is refused by the master
        own_id, intruder.framework_id = intruder.framework_id, driver.framework_id
        with pytest.raises(DriverError, match="no answer"):
            await intruder.read_file(task.task_id, timeout=3)
        intruder.framework_id = own_id
        # (as an id nobody has: no principal learns which ids exist)
        unknown = f"unknown framework {driver.framework_id}: subscribe first"
        assert unknown in refused.errors, refused.errors
    finally:
        await intruder.stop()
        await intruder.join()
        await driver.stop()
        await driver.join()


async def test_the_hello_example_runs_on_a_secured_cluster_as_its_docstring_says(
    tmp_path: Path,
) -> None:
    """examples/hello_framework.py, run as its docstring says on an authenticated cluster
    (its principal's secret in a file, the CA), registers in its principal's own role,
    runs its tasks and reads a task's stdout as that same framework."""
    need_mosquitto()
    slaves = [(f"slave-{i}", "--resources", "cpus:2;mem:1024") for i in range(2)]
    async with secure_cluster(tmp_path, CLUSTER, PRINCIPALS, slaves) as c:
        store, url = c.store, c.url
        hello = await asyncio.create_subprocess_exec(
            sys.executable, "examples/hello_framework.py",
            "--broker", f"mqtts://team-a@{url.host}:{url.port}",
            "--secret-file", str(store.secret_file("team-a")), "--ca", str(store.ca),
            "--cluster", CLUSTER, "--tasks", "3",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.getcwd()},
        )  # fmt: skip
        out, err = await within(hello.communicate(), 60)
    assert hello.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert lines[0].startswith("registered as ")
    finished = {line.split(":")[0] for line in lines if "TASK_FINISHED" in line}
    assert len(finished) == 3, lines
    assert any(" stdout: hello from" in line for line in lines), "\n".join(lines)


async def test_the_live_feed_sends_the_view_then_only_what_changes(live: Live) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(live.web + "api/v1/stream", headers={"Authorization": live.auth}) as stream,
    ):
        assert stream.status == 200

        async def next_event() -> tuple[str, dict[str, Any]]:
            kind, data = "", ""
            async for raw in stream.content:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    data = line[6:]
                elif not line and data:
                    return kind, json.loads(data)
            raise AssertionError("the stream ended")

        kind, first = await within(next_event(), 10)
        assert kind == "snapshot"
        assert first["cluster"]["slaves"] == 2
        _, driver = live.printer("sleep 300")
        await driver.start()
        try:
            known: dict[str, Any] = dict(first["frameworks"])
            changes = 0
            while (known.get(driver.framework_id) or {}).get("running_tasks", 0) < 1:
                kind, change = await within(next_event(), 10)
                assert kind == "changes"
                assert set(change) <= {"cluster", "frameworks", "roles", "t", "events"}
                for fid, entry in (change.get("frameworks") or {}).items():
                    assert known.get(fid) != entry  # only what changed is sent
                    known[fid] = entry
                changes += 1
            assert changes >= 1
        finally:
            driver.stop()
            await driver.join()
