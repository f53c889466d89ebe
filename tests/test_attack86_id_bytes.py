"""attack86: a task id of 200 characters that UTF-8 spells in more bytes than a file
name may hold (`"é" * 200`: 400 bytes; NAME_MAX is 255).

The master took it (200 characters), and its slave failed the task at its start with
`TASK_FAILED` (`REASON_COMMAND_EXECUTOR_FAILED`) and the OS's words, naming the slave's
own sandbox path: `could not start the command: [Errno 36] File name too long:
'/var/lib/.../sandboxes/fw-.../ééé...'`. The master now refuses such an id as it
refuses any other it cannot use, `TASK_ERROR` `REASON_TASK_INVALID`, saying why.
"""

from __future__ import annotations

from typing import Any

from protocol.wire.ids import id_problem

from harness.mesos import Live, framework_info, next_of
from harness.mesos import live as live  # (the fixture)


def test_an_id_is_at_most_a_file_names_bytes() -> None:
    assert id_problem("é" * 127) is None  # 254 bytes: a sandbox's `%` before it too
    assert id_problem("é" * 128) == "id must be at most 254 bytes in UTF-8"
    assert id_problem("😀" * 63) is None
    assert id_problem("😀" * 64) is not None


async def test_a_task_id_too_long_for_a_file_name_is_refused_by_the_master(live: Live) -> None:
    s = live.scheduler("team-a")
    try:
        assert await s.subscribe(framework_info("team-a")) == 200
        [offer] = (await next_of(s, "OFFERS"))["offers"]
        task: dict[str, Any] = {
            "name": "long",
            "task_id": {"value": "é" * 200},
            "agent_id": offer["agent_id"],
            "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}}],
            "command": {"value": "true"},
        }
        launch = {"type": "LAUNCH", "launch": {"task_infos": [task]}}
        call = {"offer_ids": [offer["id"]], "operations": [launch]}
        assert (await s.call("ACCEPT", call))[0] == 202
        status = (await next_of(s, "UPDATE"))["status"]
        assert (status["state"], status["reason"]) == ("TASK_ERROR", "REASON_TASK_INVALID")
        assert "bytes" in status["message"]
        assert "sandboxes" not in status["message"]
    finally:
        await s.close()
