"""attack86: a tenant puts a lone UTF-16 surrogate (`"\\ud800"` in JSON, or its three
UTF-8 bytes) in a string of a Mesos scheduler call.

Python's `json` reads both into a `str` no UTF-8 can hold, and pydantic checks a model's
own string fields for them but not the strings inside its dicts and lists (a command's
environment, a health check's). An ACCEPT whose task's environment held one was
answered 202; the master's Accept handler then raised UnicodeEncodeError
(`master.handler_failed`) after it had taken the offer from the books and before it gave
anything back: the framework heard nothing of its task, and the offer's resources were
held by nobody's task and offered to nobody again, an Accept at a time until the cluster
was gone. Such a body is now a 400 that says why, and the offer is untouched.
"""

from __future__ import annotations

import json
from typing import Any

from benchmarks.mesos_client import MesosScheduler

from harness.mesos import Live, framework_info, next_of, operator_call
from harness.mesos import live as live  # (the fixture)


def task(agent: Any, task_id: str, env: dict[str, str]) -> dict[str, Any]:
    variables = [{"name": k, "value": v} for k, v in env.items()]
    return {
        "name": task_id,
        "task_id": {"value": task_id},
        "agent_id": agent,
        "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}}],
        "command": {"value": "true", "environment": {"variables": variables}},
    }


def accept(s: MesosScheduler, offer: dict[str, Any], *tasks: Any) -> bytes:
    """An ACCEPT of `offer` launching `tasks`, as JSON (`\\ud800` written as its escape)."""
    launch = {"type": "LAUNCH", "launch": {"task_infos": list(tasks)}}
    call = {
        "type": "ACCEPT",
        "framework_id": {"value": s.framework_id},
        "accept": {"offer_ids": [offer["id"]], "operations": [launch]},
    }
    return json.dumps(call).encode()


async def ends(s: MesosScheduler, task_id: str) -> str:
    """The task's end as its framework hears it (each update acknowledged)."""
    while True:
        status = (await next_of(s, "UPDATE"))["status"]
        if "uuid" in status:
            ack = {k: status[k] for k in ("agent_id", "task_id", "uuid")}
            await s.call("ACKNOWLEDGE", ack)
        if status["task_id"]["value"] == task_id and status["state"] not in (
            "TASK_STARTING",
            "TASK_RUNNING",
        ):
            return str(status["state"])


async def test_a_lone_surrogate_in_a_call_is_a_400_and_takes_no_offer(live: Live) -> None:
    s = live.scheduler("team-a")
    try:
        assert await s.subscribe(framework_info("team-a")) == 200
        [offer] = (await next_of(s, "OFFERS"))["offers"]
        agent = offer["agent_id"]
        escaped = accept(s, offer, task(agent, "t1", {"A": "\ud800"}))
        assert b"\\ud800" in escaped
        status, body = await s.post(None, raw=escaped)
        assert status == 400, (status, body)
        assert "surrogate" in body["error"]
        # a surrogate's own UTF-8 bytes (which no UTF-8 text holds), in a variable's name
        raw = accept(s, offer, task(agent, "t2", {"NAME_HERE": "x"}))
        raw = raw.replace(b"NAME_HERE", b"B\xed\xa0\x80")
        status, body = await s.post(None, raw=raw)
        assert status == 400, (status, body)
        # the offer is still the framework's: it launches on it, a character beyond the
        # BMP (a surrogate pair's escape, which is no lone one) in its environment
        status, _ = await s.post(None, raw=accept(s, offer, task(agent, "t3", {"A": "😀"})))
        assert status == 202
        assert await ends(s, "t3") == "TASK_FINISHED"
    finally:
        await s.close()


async def test_the_operator_api_reads_calls_as_unicode_text_too(live: Live) -> None:
    """The operator API (`POST /api/v1`) reads its calls the same way (`read_json`)."""
    status, body = await operator_call(live, {"type": "GET_HEALTH", "note": "\udcff"})
    assert status == 400, (status, body)
    assert "surrogate" in body["error"]
    assert (await operator_call(live, {"type": "GET_HEALTH", "note": "😀"}))[0] == 200
