"""attack86: a tenant's task data on a slave that simulates its tasks (`drfmesos slave
--simulated-tasks`, which reads a task's duration from its data, `{"duration": S}`).

Data that was JSON without a `duration` (`{}`), or nested too deep for Python's parser,
raised KeyError or RecursionError out of the slave's RunTasks handler
(`bus.handler_failed`): the task was never reported again, neither RUNNING nor ended,
and its framework waited for it for good. Data the slave cannot read is now a task of
no duration, as data that is not JSON at all always was.
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

from harness.mesos import framework_info, live_cluster, next_of

DATA = {
    "no-duration": b"{}",
    "too-deep": b"[" * 100_000 + b"]" * 100_000,
    "not-json": b"\xff",
}


def task(agent: Any, task_id: str, data: bytes) -> dict[str, Any]:
    return {
        "name": task_id,
        "task_id": {"value": task_id},
        "agent_id": agent,
        "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}}],
        "command": {"value": "true"},
        "data": base64.b64encode(data).decode(),
    }


async def test_a_simulated_tasks_unreadable_data_is_a_task_of_no_duration(
    tmp_path: Path,
) -> None:
    async with live_cluster(tmp_path, simulated=True) as live:
        s = live.scheduler("team-a")
        try:
            assert await s.subscribe(framework_info("team-a")) == 200
            [offer] = (await next_of(s, "OFFERS"))["offers"]
            tasks = [task(offer["agent_id"], name, data) for name, data in DATA.items()]
            launch = {"type": "LAUNCH", "launch": {"task_infos": tasks}}
            call = {"offer_ids": [offer["id"]], "operations": [launch]}
            assert (await s.call("ACCEPT", call))[0] == 202
            ended: dict[str, str] = {}
            async with asyncio.timeout(20):
                while len(ended) < len(DATA):
                    status = (await next_of(s, "UPDATE"))["status"]
                    ack = {k: status[k] for k in ("agent_id", "task_id", "uuid")}
                    await s.call("ACKNOWLEDGE", ack)
                    if status["state"] not in ("TASK_STAGING", "TASK_STARTING", "TASK_RUNNING"):
                        ended[status["task_id"]["value"]] = status["state"]
            assert ended == dict.fromkeys(DATA, "TASK_FINISHED")
        finally:
            await s.close()
