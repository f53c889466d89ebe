"""A tenant with valid credentials attacks the Mesos HTTP API: every bad or forbidden call
gets a JSON 4xx, and the master goes on serving (no 500, no lost framework)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from types import SimpleNamespace
from typing import Any

import pytest

from benchmarks.mesos_client import MesosScheduler
from master.mesos_api import scheduler_http
from master.mesos_api.scheduler_http import STREAM_EVENTS, STREAMS_PER_PRINCIPAL, SchedulerStream
from protocol import recordio
from protocol.wire.messages import Heartbeat

from harness.helpers import eventually
from harness.mesos import Live, framework_info, next_of
from harness.mesos import live as live  # (the fixture)

OFFER_ID = {"value": "o-1"}
AGENT = {"value": "slave-0"}


def accept(*operations: Any) -> dict[str, Any]:
    return {"offer_ids": [OFFER_ID], "operations": list(operations)}


def task(resources: Any, task_id: Any = None) -> dict[str, Any]:
    return {
        "name": "t",
        "task_id": task_id or {"value": "t"},
        "agent_id": AGENT,
        "resources": resources,
        "command": {"value": "true"},
    }


def launch(*tasks: Any) -> dict[str, Any]:
    return {"type": "LAUNCH", "launch": {"task_infos": list(tasks)}}


MALFORMED_CALLS: list[tuple[str, Any]] = [
    ("ACCEPT", {"offer_ids": [OFFER_ID], "operations": 5}),
    ("ACCEPT", accept({"type": "LAUNCH", "launch": {"task_infos": 7}})),
    ("ACCEPT", accept(launch(task([{"name": "cpus", "scalar": {"value": -1}}])))),
    ("ACCEPT", accept(launch(task([{"name": "cpus", "scalar": {"value": 1e300}}])))),
    ("ACCEPT", accept(launch(task([{"name": "cpus", "type": "RANGES"}])))),
    ("ACCEPT", accept(launch(task([{"name": "cpus", "scalar": 5}])))),
    ("ACCEPT", accept(launch(*[task([], {"value": f"t{i}"}) for i in range(5000)]))),
    ("RECONCILE", {"tasks": [{"task_id": {"value": f"t{i}"}} for i in range(5000)]}),
    ("DECLINE", {"offer_ids": [{"value": f"o{i}"} for i in range(5000)]}),
    ("RECONCILE", {"tasks": 5}),
    ("REQUEST", {"requests": 5}),
    ("DRFMESOS_DEMAND", {"requests": [{"resources": [], "count": "many"}]}),
    ("DRFMESOS_DEMAND", {"requests": [{"resources": [], "count": 1e300}]}),
    ("DECLINE", {"offer_ids": [OFFER_ID], "filters": {"refuse_seconds": "soon"}}),
    ("MESSAGE", {"agent_id": AGENT, "executor_id": {"value": "e"}, "data": 5}),
    ("KILL", {"task_id": "t"}),
    ("ACKNOWLEDGE", {"task_id": {"value": "t"}, "uuid": 5}),
]

MALFORMED_BODIES: list[bytes] = [
    b"[" * 100_000 + b"]" * 100_000,  # deeply nested: a RecursionError in json
    b'{"type":"REVIVE","framework_id":' + b'{"a":' * 50_000 + b"1" + b"}" * 50_001,
    b'{"type":"SUBSCRIBE","subscribe":{"framework_info":[1]}}',
    b'{"type":"SUBSCRIBE","subscribe":{"framework_info":{"name":"x","capabilities":5}}}',
    b'{"type":"SUBSCRIBE","subscribe":{"framework_info":{"name":"x","failover_timeout":[]}}}',
    b'{"type":"SUBSCRIBE","subscribe":{"framework_info":{"name":"x","failover_timeout":NaN}}}',
    b'{"type":"SUBSCRIBE","subscribe":{"framework_info":{"name":"x","failover_timeout":1e400}}}',
    b'{"type":"SUBSCRIBE","subscribe":{"framework_info":{"name":"x","roles":"team-a"}}}',
    b'{"type":"SUBSCRIBE","subscribe":5}',
    b'{"type":5}',
    b'"\xff\xfe"',
]


async def post(s: MesosScheduler, call: Any = None, raw: bytes | None = None) -> tuple[int, Any]:
    """(status, JSON body or its text): a 500's body is not JSON."""
    headers = {**s.headers, "Content-Type": "application/json", "Mesos-Stream-Id": s.stream_id}
    data = raw if raw is not None else json.dumps(call).encode()
    async with s.session.post(s.url, data=data, headers=headers) as r:
        text = await r.text()
        try:
            return r.status, json.loads(text)
        except ValueError:
            return r.status, text


async def test_malformed_calls_get_a_json_4xx_and_the_stream_lives_on(live: Live) -> None:
    s = live.scheduler()
    try:
        assert await s.subscribe(framework_info(failover_timeout=60)) == 200
        answers = {}
        for i, (kind, body) in enumerate(MALFORMED_CALLS):
            call = {"type": kind, "framework_id": {"value": s.framework_id}, kind.lower(): body}
            answers[f"{i} {kind} {str(body)[:80]}"] = await post(s, call)
        for raw in MALFORMED_BODIES:
            answers[repr(raw[:90])] = await post(s, raw=raw)
        wrong = {
            what: (status, body)
            for what, (status, body) in answers.items()
            if not (400 <= status < 500 and isinstance(body, dict) and body.get("error"))
        }
        assert not wrong, "\n".join(f"{k}: {v[0]} {str(v[1])[:60]}" for k, v in wrong.items())
        # the framework is still there, on the same stream
        assert (await s.call("REVIVE"))[0] == 202
        assert await next_of(s, "OFFERS")
    finally:
        await s.close()


async def test_another_principals_framework_is_not_theirs(live: Live) -> None:
    a, b = live.scheduler("team-a"), live.scheduler("team-b")
    try:
        assert await a.subscribe(framework_info("team-a", failover_timeout=60)) == 200
        assert await b.subscribe(framework_info("team-b")) == 200
        theirs = {"value": a.framework_id}
        # re-subscribing with it (as framework_id, or in framework_info.id)
        info = framework_info("team-b", id=theirs)
        thief = MesosScheduler(live.web, live.auth("team-b"))
        try:
            assert await thief.subscribe(info) == 403
            assert await thief.subscribe(framework_info("team-b"), framework_id=theirs) == 403
        finally:
            await thief.close()
        # a call with it and its stream id, stolen
        call = {"type": "KILL", "framework_id": theirs, "kill": {"task_id": {"value": "t"}}}
        status, body = await b.post(call, stream_id=a.stream_id)
        assert (status, body["error"]) == (400, "Framework cannot be found")  # as unknown
        # a weight, a role it was not given
        assert await b.subscribe({**framework_info("team-b"), "roles": ["team-a"]}) == 403
        # a's stream still serves it
        assert (await a.call("REVIVE"))[0] == 202
    finally:
        await a.close()
        await b.close()


async def test_a_principal_opens_at_most_so_many_streams(live: Live) -> None:
    """Streams opened and never read: past the cap a SUBSCRIBE is a 429, other principals
    are served, and one closed makes room again."""
    opened = [live.scheduler() for _ in range(STREAMS_PER_PRINCIPAL)]
    extra, other = live.scheduler(), live.scheduler("team-b")
    try:
        codes = await asyncio.gather(*(s.subscribe(framework_info()) for s in opened))
        assert set(codes) == {200}
        assert await extra.subscribe(framework_info()) == 429
        assert await other.subscribe(framework_info("team-b")) == 200
        await opened.pop().close()
        async with asyncio.timeout(10):
            while (code := await extra.subscribe(framework_info())) != 200:
                assert code == 429
                await asyncio.sleep(0.2)
    finally:
        for s in [*opened, extra, other]:
            await s.close()


class StuckTransport:
    aborted = False

    def abort(self) -> None:
        self.aborted = True

    def get_write_buffer_size(self) -> int:
        return 0  # (what the writer stuck on it could not hand over stays queued)


async def test_a_reader_that_never_reads_loses_its_stream_not_our_memory() -> None:
    """The writer is stuck on a reader that never reads: once its queue is full the
    connection is aborted (the framework's failover runs), and the queue stays bounded."""
    stream = SchedulerStream("team-a", lambda p, inbox: f"t/{p}/{inbox}", False)
    stream.answer.set_result(Heartbeat())
    stuck = StuckTransport()
    stream.transport = stuck  # type: ignore[assignment]
    for _ in range(STREAM_EVENTS + 100):
        stream.sink(Heartbeat())
    assert stuck.aborted
    assert stream.queue.qsize() <= STREAM_EVENTS
    assert not stream.ended  # lost, not ended by the master: its failover timeout runs


async def test_operator_endpoints_refuse_a_framework_and_bad_json(live: Live) -> None:
    s = live.scheduler()
    try:
        for path in ("master/state", "state.json", "master/tasks", "metrics/snapshot"):
            async with s.session.get(live.web + path, headers=s.headers) as r:
                assert r.status == 403, path
                assert (await r.json())["error"]
        headers = {**s.headers, "Content-Type": "application/json"}
        for call in (b'{"type":"GET_STATE"}', b'{"type":"SUBSCRIBE"}'):
            async with s.session.post(live.web + "api/v1", data=call, headers=headers) as r:
                assert r.status == 403
        # an operator's call nested too deeply is a 400, not the server's trouble
        headers = {"Authorization": live.auth("ops"), "Content-Type": "application/json"}
        deep = b"[" * 100_000 + b"]" * 100_000
        async with s.session.post(live.web + "api/v1", data=deep, headers=headers) as r:
            assert r.status == 400
            assert "nested" in (await r.json())["error"]
    finally:
        await s.close()


async def test_the_executor_adapter_has_one_stream_and_refuses_bad_json() -> None:
    """Another local process that finds the adapter's loopback port cannot take the
    executor's events with a second SUBSCRIBE, nor crash it with deep JSON."""
    import aiohttp

    from frameworks.mesos_executor import PATH, MesosExecutorAdapter

    driver = SimpleNamespace(framework_id="fw-1", executor_id="e-1", slave_id="s-1")
    adapter = MesosExecutorAdapter("true")
    adapter.driver = driver  # type: ignore[assignment]
    await adapter._serve()
    assert adapter.endpoint.startswith("127.0.0.1:")  # loopback only
    url = f"http://{adapter.endpoint}{PATH}"
    ids = {"framework_id": {"value": "fw-1"}, "executor_id": {"value": "e-1"}}
    subscribe = json.dumps({"type": "SUBSCRIBE", **ids, "subscribe": {}}).encode()
    try:
        async with aiohttp.ClientSession() as session:
            first = await session.post(url, data=subscribe)
            assert first.status == 200
            async with session.post(url, data=subscribe) as second:
                assert second.status == 409
            async with session.post(url, data=b"[" * 100_000 + b"]" * 100_000) as r:
                assert r.status == 400
            wrong = {**ids, "framework_id": {"value": "fw-2"}, "type": "UPDATE"}
            async with session.post(url, data=json.dumps(wrong).encode()) as r:
                assert r.status == 403
            adapter._event("MESSAGE", {"data": ""})
            decoder = recordio.Decoder()
            got: list[dict[str, Any]] = []
            async with asyncio.timeout(5):
                while len(got) < 2:
                    got += [json.loads(x) for x in decoder.feed(await first.content.readany())]
            assert [e["type"] for e in got] == ["SUBSCRIBED", "MESSAGE"]
            first.close()  # the executor's connection drops: it may subscribe again
            live = adapter.subscriber
            await eventually(lambda: live is None or live.is_closing(), 5)
            adapter._event("KILL", {"task_id": {"value": "t"}})  # (for the next stream)
            async with asyncio.timeout(5):
                while True:
                    again = await session.post(url, data=subscribe)
                    if again.status == 200:
                        break
                    again.close()
                    await asyncio.sleep(0.1)
                got = []
                while len(got) < 2:
                    got += [json.loads(x) for x in decoder.feed(await again.content.readany())]
            assert [e["type"] for e in got] == ["SUBSCRIBED", "KILL"]  # (nothing lost)
            again.close()
    finally:
        await adapter._stop_http()


async def test_path_task_ids_and_another_frameworks_offer(live: Live) -> None:
    a, b = live.scheduler("team-a"), live.scheduler("team-b")
    try:
        assert await a.subscribe(framework_info("team-a")) == 200
        assert await b.subscribe(framework_info("team-b", weight=1e9)) == 200
        [offer] = (await next_of(a, "OFFERS"))["offers"]
        agent = offer["agent_id"]

        def tasks(*ids: str) -> list[dict[str, Any]]:
            cpu = [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}}]
            return [{**task(cpu, {"value": i}), "agent_id": agent} for i in ids]

        # b accepts a's offer: refused on b's stream; a's offer is untouched
        stolen = {"offer_ids": [offer["id"]], "operations": [launch(*tasks("b1"))]}
        assert (await b.call("ACCEPT", stolen))[0] == 202
        assert (await next_of(b, "UPDATE"))["status"]["state"] in ("TASK_LOST", "TASK_DROPPED")
        assert (await b.call("KILL", {"task_id": {"value": "ok"}, "agent_id": agent}))[0] == 202
        # an id over 200 characters is a 400; path-like ones are each a TASK_ERROR
        too_long = {"offer_ids": [offer["id"]], "operations": [launch(*tasks("a" * 300))]}
        assert (await a.call("ACCEPT", too_long))[0] == 400
        bad = ("../x", "/etc", "x\x00y", "..")
        call = {"offer_ids": [offer["id"]], "operations": [launch(*tasks(*bad, "ok"))]}
        assert (await a.call("ACCEPT", call))[0] == 202
        states: dict[str, str] = {}
        while states.get("ok") != "TASK_FINISHED" or len(states) < 5:
            status = (await next_of(a, "UPDATE"))["status"]
            states[status["task_id"]["value"]] = status["state"]
            if "uuid" in status:
                ack = {"agent_id": agent, "task_id": status["task_id"], "uuid": status["uuid"]}
                await a.call("ACKNOWLEDGE", ack)
        assert {states[i] for i in bad} == {"TASK_ERROR"}
    finally:
        await a.close()
        await b.close()


async def chunked_answer(live: Live, chunks: list[bytes], wait: float) -> tuple[bytes, bytes]:
    """A chunked POST that sends `chunks` and never its end: the status line and body."""
    host, port = live.web.split("//")[1].rstrip("/").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        head = (
            "POST /api/v1/scheduler HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Authorization: {live.auth('team-a')}\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        writer.write(head.encode())
        for chunk in chunks:
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await writer.drain()
        async with asyncio.timeout(wait):
            answer = await reader.read(4096)
        status_line, _, rest = answer.partition(b"\r\n")
        return status_line, rest.split(b"\r\n\r\n", 1)[-1]
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def test_chunked_bodies_with_no_end_are_cut_off(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scheduler_http, "BODY_SECONDS", 2.0)  # (10 s in a master)
    status, body = await chunked_answer(live, [b'{"type":'], 30)
    assert b" 408 " in status
    assert b"error" in body
    status, body = await chunked_answer(live, [b" " * 65536] * 20, 30)  # over 1 MiB
    assert b" 413 " in status
    assert b"error" in body


async def test_a_refused_call_is_logged() -> None:
    """Another's framework id or a wrong stream id: a 4xx and a structured log line."""
    from aiohttp.test_utils import make_mocked_request

    from master.mesos_api.scheduler_calls import parse_call
    from master.mesos_api.scheduler_http import SchedulerApi

    logged: list[dict[str, Any]] = []
    api = SchedulerApi(SimpleNamespace(info=SimpleNamespace(master_id="m")), None)  # type: ignore[arg-type]
    log = SimpleNamespace(info=lambda event, **kw: logged.append({"event": event, **kw}))
    api.log = api.refused_lines.out = log  # (refusals' lines are sampled: master.http.log)
    call = parse_call({"type": "REVIVE", "framework_id": {"value": "fw-theirs"}})
    request = make_mocked_request("POST", "/api/v1/scheduler")
    api.master = SimpleNamespace(books=SimpleNamespace(frameworks={}))  # type: ignore[assignment]
    answer = await api._call(request, call, "team-b")
    assert answer.status == 400  # Mesos's "Framework cannot be found"
    [line] = [e for e in logged if e["event"] == "mesos.bad_call"]
    assert (line["principal"], line["code"]) == ("team-b", "not-its-framework")
    assert line["framework_id"] == "fw-theirs"


async def test_another_principals_framework_id_is_answered_as_one_nobody_has(
    live: Live,
) -> None:
    """A SUBSCRIBE naming another principal's framework answered "belongs to another
    principal" where an unknown id was taken (as a new framework of that id): an
    existence oracle, and an id of the tenant's choosing. Now the two are one answer, as
    are the calls naming them and a read of their tasks' files."""
    a, b = live.scheduler("team-a"), live.scheduler("team-b")
    try:
        assert await a.subscribe(framework_info("team-a", failover_timeout=60)) == 200
        assert await b.subscribe(framework_info("team-b")) == 200
        nobodys = "fw-0123456789abcdef-0123456789abcdef0123456789abcdef"

        async def subscribing_as(framework_id: str) -> tuple[int, str]:
            ids = {"value": framework_id}
            call = {"type": "SUBSCRIBE", "framework_id": ids,
                    "subscribe": {"framework_info": framework_info("team-b", id=ids)}}  # fmt: skip
            status, body = await b.post(call)
            return status, body["error"].replace(framework_id, "X")

        async def calling_as(framework_id: str) -> tuple[int, str]:
            call = {"type": "REVIVE", "framework_id": {"value": framework_id}}
            status, body = await b.post(call)
            return status, body["error"].replace(framework_id, "X")

        assert await subscribing_as(a.framework_id) == await subscribing_as(nobodys)
        assert (await subscribing_as(nobodys))[0] == 403
        assert await calling_as(a.framework_id) == await calling_as(nobodys)
        assert await calling_as(nobodys) == (400, "Framework cannot be found")  # as Mesos
        assert live.master is not None
        assert nobodys not in live.master.books.frameworks  # (not taken as a new one)
        for framework_id in (a.framework_id, nobodys):  # its tasks' files
            url = f"{live.web.rstrip('/')}/api/v1/tasks/{framework_id}/t/files/stdout"
            async with b.session.get(url, headers=b.headers) as r:
                assert (r.status, await r.json()) == (
                    403,
                    {"error": "not a task of one of your frameworks"},
                )
    finally:
        await a.close()
        await b.close()
