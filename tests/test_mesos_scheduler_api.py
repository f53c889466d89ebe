"""Mesos's v1 Scheduler HTTP API on a secure cluster, spoken the way a Mesos client speaks
it: raw HTTP, JSON calls, the RecordIO event stream; bad input gets a JSON 4xx and changes
nothing. The API's own behaviour is tested on a master and a slave in process (the memory
transport with the store's ACL, the master's HTTP on a real socket, tasks as processes);
the rate limit and HTTPS, set by the master's command line, on a live cluster (mosquitto
with TLS, master and slave as processes)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import ssl
from pathlib import Path
from typing import Any

import pytest

from benchmarks.mesos_client import MesosScheduler, basic
from master.mesos_api import scheduler_http

from conftest import need_mosquitto
from harness.helpers import (
    secure_cluster,
)
from harness.mesos import CLUSTER, PRINCIPALS, Live, framework_info, next_of
from harness.mesos import live as live


def command_task(task_id: str, agent: dict[str, Any], command: str) -> dict[str, Any]:
    return {
        "name": task_id,
        "task_id": {"value": task_id},
        "agent_id": agent,
        "resources": [
            {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
            {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}},
        ],
        "command": {"value": command},
    }


async def test_a_mesos_framework_runs_kills_and_reconciles_over_http(live: Live) -> None:
    s = live.scheduler()
    try:
        assert await s.subscribe(framework_info(failover_timeout=60)) == 200
        assert s.subscribed["heartbeat_interval_seconds"] > 0
        assert s.subscribed["master_info"]["address"]["port"] > 0
        [offer] = (await next_of(s, "OFFERS"))["offers"]
        assert offer["framework_id"]["value"] == s.framework_id
        assert {r["name"] for r in offer["resources"]} >= {"cpus", "mem"}
        agent = offer["agent_id"]
        tasks = [command_task("done", agent, "true"), command_task("long", agent, "sleep 60")]
        launch = {"type": "LAUNCH", "launch": {"task_infos": tasks}}
        accept = {"offer_ids": [offer["id"]], "operations": [launch],
                  "filters": {"refuse_seconds": 1}}  # fmt: skip
        assert (await s.call("ACCEPT", accept))[0] == 202
        states: dict[str, str] = {}
        while states.get("done") != "TASK_FINISHED" or states.get("long") != "TASK_RUNNING":
            status = (await next_of(s, "UPDATE"))["status"]
            assert status["agent_id"] == agent
            states[status["task_id"]["value"]] = status["state"]
            assert "uuid" in status  # the slave's updates want an acknowledgement
            ack = {"agent_id": agent, "task_id": status["task_id"], "uuid": status["uuid"]}
            assert (await s.call("ACKNOWLEDGE", ack))[0] == 202
        kill = {"task_id": {"value": "long"}, "agent_id": agent}
        assert (await s.call("KILL", kill))[0] == 202
        killed = (await next_of(s, "UPDATE"))["status"]
        while killed["state"] != "TASK_KILLED":  # (an update re-sent before its ack arrived)
            killed = (await next_of(s, "UPDATE"))["status"]
        assert killed["task_id"]["value"] == "long"
        ack = {"agent_id": agent, "task_id": killed["task_id"], "uuid": killed["uuid"]}
        assert (await s.call("ACKNOWLEDGE", ack))[0] == 202
        # reconciliation answers from the master's books, wanting no acknowledgement (no
        # uuid): an update with one is a re-send of one whose ack was still on its way
        asked = {"tasks": [{"task_id": {"value": "long"}}, {"task_id": {"value": "never"}}]}
        assert (await s.call("RECONCILE", asked))[0] == 202
        answers: dict[str, dict[str, Any]] = {}
        while len(answers) < 2:
            status = (await next_of(s, "UPDATE"))["status"]
            if "uuid" not in status:  # (not a re-sent update whose ack was on its way)
                answers[status["task_id"]["value"]] = status
        assert answers["long"]["state"] == "TASK_KILLED"
        assert answers["never"]["state"] == "TASK_LOST"  # (not partition-aware)
        assert answers["never"]["reason"] == "REASON_RECONCILIATION"
        for kind in ("REVIVE", "SUPPRESS"):
            assert (await s.call(kind))[0] == 202
        s.url += "?_ts=1700000000"  # a query string against caches is ignored
        assert (await s.call("REVIVE"))[0] == 202
        # a heartbeat comes at the interval SUBSCRIBED announced
        async with asyncio.timeout(s.subscribed["heartbeat_interval_seconds"] * 3):
            await next_of(s, "HEARTBEAT")
        # teardown: the stream closes
        assert (await s.call("TEARDOWN"))[0] == 202
        async with asyncio.timeout(10):
            rest = [e async for e in s.events()]
        assert rest[-1]["type"] == "ERROR"
    finally:
        await s.close()


async def test_resubscribing_with_its_id_keeps_its_tasks(live: Live) -> None:
    s, again = live.scheduler(), live.scheduler()
    try:
        assert await s.subscribe(framework_info(failover_timeout=60)) == 200
        [offer] = (await next_of(s, "OFFERS"))["offers"]
        task = command_task("kept", offer["agent_id"], "sleep 60")
        launch = {"type": "LAUNCH", "launch": {"task_infos": [task]}}
        await s.call("ACCEPT", {"offer_ids": [offer["id"]], "operations": [launch]})
        state = ""
        while state != "TASK_RUNNING":  # (its slave sends RUNNING once STARTING is acked)
            status = (await next_of(s, "UPDATE"))["status"]
            state = status["state"]
            ack = {"agent_id": status["agent_id"], "task_id": status["task_id"]}
            assert (await s.call("ACKNOWLEDGE", {**ack, "uuid": status["uuid"]}))[0] == 202
        await s.close()  # the connection drops: failover timeout, tasks run on
        fid = {"value": s.framework_id}
        assert await again.subscribe(framework_info(id=fid), framework_id=fid) == 200
        assert again.framework_id == s.framework_id
        assert (await again.call("RECONCILE", {"tasks": []}))[0] == 202
        status = (await next_of(again, "UPDATE"))["status"]
        while "uuid" in status:  # (updates it never acknowledged come again first)
            status = (await next_of(again, "UPDATE"))["status"]
        assert (status["task_id"]["value"], status["state"]) == ("kept", "TASK_RUNNING")
    finally:
        await again.close()
        await s.close()


async def test_bad_input_gets_a_json_4xx_and_changes_nothing(live: Live) -> None:
    a, b = live.scheduler("team-a"), live.scheduler("team-b")
    try:
        assert await a.subscribe(framework_info("team-a")) == 200
        assert await b.subscribe(framework_info("team-b")) == 200
        before = await live.state(lambda st: len(st.frameworks) == 2)

        async def refused(status: int, *args: Any, **kw: Any) -> str:
            got, body = await a.post(*args, **kw)
            assert got == status, body
            assert isinstance(body["error"], str)
            return str(body["error"])

        assert "Expecting" in await refused(400, None, raw=b"{not json")
        assert "unknown call type" in await refused(400, {"type": "NAP"})
        call = {"type": "REVIVE", "framework_id": {"value": a.framework_id}}
        assert "Stream-Id" in await refused(400, call, stream_id="0000")
        other = {"type": "TEARDOWN", "framework_id": {"value": b.framework_id}}
        assert "cannot be found" in await refused(400, other)  # another's: as unknown
        huge = b'{"type":"REVIVE","pad":"' + b"x" * (100 * 1024 * 1024) + b'"}'
        assert "at most" in await refused(413, None, raw=huge)
        # no credentials, wrong ones, an operator's, another's principal in framework_info
        nobody = MesosScheduler(live.web, None)
        wrong = MesosScheduler(live.web, basic("team-a", "not-it"))
        operator = MesosScheduler(live.web, live.auth("ops"))
        try:
            assert await nobody.subscribe(framework_info()) == 401
            assert await wrong.subscribe(framework_info()) == 401
            # and each says which: none sent, or refused (a typo in the secret)
            none_said = (await nobody.post({"type": "REVIVE"}))[1]["error"]
            wrong_said = (await wrong.post({"type": "REVIVE"}))[1]["error"]
            assert none_said == "framework credentials needed (HTTP Basic)"
            assert wrong_said.startswith("the credentials given were refused: a wrong secret")
            assert await operator.subscribe(framework_info()) == 403
            assert await a.subscribe(framework_info("team-b")) == 403  # not its principal
            # the role ACL of --principals, as on the bus: team-a may not use team-b's role
            assert await a.subscribe({**framework_info("team-a"), "role": "team-b"}) == 403
        finally:
            for s in (nobody, wrong, operator):
                await s.close()
        after = await live.state(lambda st: True)
        assert [f.framework_id for f in after.frameworks] == [
            f.framework_id for f in before.frameworks
        ]
        assert all(f.active for f in after.frameworks)
    finally:
        await a.close()
        await b.close()


async def test_a_slow_loris_body_is_cut_off(live: Live, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduler_http, "BODY_SECONDS", 2.0)  # (10 s in a master)
    host, port = live.web.split("//")[1].rstrip("/").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        head = (
            "POST /api/v1/scheduler HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Authorization: {live.auth('team-a')}\r\nContent-Length: 1000\r\n\r\n"
        )
        writer.write(head.encode() + b'{"type":')
        async with asyncio.timeout(30):
            answer = await reader.read(4096)
        status_line, _, rest = answer.partition(b"\r\n")
        assert b" 408 " in status_line
        assert json.loads(rest.split(b"\r\n\r\n", 1)[1])["error"]
    finally:
        writer.close()
        await writer.wait_closed()


async def test_version_answers_as_mesos_without_credentials(live: Live) -> None:
    s = MesosScheduler(live.web, None)
    try:
        async with s.session.get(live.web + "version") as r:
            assert r.status == 200
            assert (await r.json())["version"].startswith("1.")
        # our own API's description stays ours: Mesos's API is documented by Mesos
        headers = {"Authorization": live.auth("ops")}
        async with s.session.get(live.web + "api/v1/openapi.json", headers=headers) as r:
            paths = (await r.json())["paths"]
            assert "/api/v1/state" in paths
            assert "/api/v1/scheduler" not in paths
    finally:
        await s.close()


async def test_a_framework_in_curl_alone_runs_a_task(live: Live) -> None:
    """examples/mesos-curl.sh: the wire, shown with nothing but curl and sh."""
    if not shutil.which("curl"):
        pytest.skip("curl is not installed")
    secret = live.store.secret_file("team-a").read_text().strip()
    script = Path(__file__).parent.parent / "examples" / "mesos-curl.sh"
    process = await asyncio.create_subprocess_exec(
        "sh", str(script), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "MASTER": live.web.rstrip("/"), "AUTH": f"team-a:{secret}",
             "ROLE": "team-a"},
    )  # fmt: skip
    try:
        async with asyncio.timeout(90):
            out, _ = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    text = out.decode()
    assert process.returncode == 0, text
    assert "task hello: TASK_FINISHED" in text
    assert "torn down" in text
    await live.state(lambda st: not st.frameworks)


async def test_the_principal_rate_limit_holds_over_http_as_on_the_bus(tmp_path: Path) -> None:
    """One call in ten seconds and one waiting: past that a call is refused, and the
    framework hears why on its stream, as an SDK framework hears it on the bus."""
    need_mosquitto()
    slave = ("slave-0", "--resources", "cpus:1;mem:256")
    limits = ["--rate-limit", "0.1", "--rate-capacity", "1"]
    async with secure_cluster(tmp_path, CLUSTER, PRINCIPALS, [slave], limits) as c:
        s = Live(c.store, c.web).scheduler()
        try:
            assert await s.subscribe(framework_info()) == 200
            for _ in range(3):  # handled or queued or refused: each is taken (202)
                assert (await s.call("REVIVE"))[0] == 202
            error = await next_of(s, "ERROR")
            assert "rate limit" in error["message"]
        finally:
            await s.close()


async def test_a_framework_subscribes_over_https(tmp_path: Path) -> None:
    """With --http-cert the same API is served over TLS (the store's certificate here)."""
    need_mosquitto()
    store = tmp_path / "auth"  # (made by secure_cluster before the master starts)
    tls = ["--http-cert", str(store / "broker.pem"), "--http-key", str(store / "broker.key")]
    slave = ("slave-0", "--resources", "cpus:1;mem:256")
    async with secure_cluster(tmp_path, CLUSTER, PRINCIPALS, [slave], tls) as c:
        assert c.web.startswith("https://")
        trust = ssl.create_default_context(cafile=str(store / "ca.pem"))
        live = Live(c.store, c.web)
        s = MesosScheduler(c.web, live.auth("team-a"), ssl=trust)
        try:
            assert await s.subscribe(framework_info()) == 200
            assert (await next_of(s, "OFFERS"))["offers"]
        finally:
            await s.close()
