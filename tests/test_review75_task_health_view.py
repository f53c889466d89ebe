"""Review 75: a live task's health check and kill policy are in no view a Mesos tool reads.

Mesos's master keeps a `Task` of each TaskInfo it launches (src/common/protobuf_utils.cpp,
`createTask`): besides its ids, name, state and resources, it copies the TaskInfo's
`health_check` (whole: its type, timings and a COMMAND check's command), its
`kill_policy`, `container`, `labels` and `discovery`, and its command's `user` -- but
not its command or data. `/master/state` (`tasks[].health_check`, `kill_policy`) and the
operator API's GET_TASKS / GET_STATE (`Task.health_check`, `Task.kill_policy`) show them:
what a Mesos user reads to see that a service's health checking is on, and how long a
kill waits.

Here both views show a live task without them (operator_state.task_json and
classic.task_v0 write neither), though the books keep the check's kind and timings and
the kill policy (books.kept_info, reviews 72 and 73: "health check's kind and timings"
are kept "what a view reads of it"). What is not kept (a COMMAND check's command line)
is a documented difference to make; the check itself and the kill policy are not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.mesos_client import MesosScheduler, basic

from harness.helpers import eventually
from harness.mesos import framework_info, next_of, stream_rig

CHECK = {
    "type": "HTTP",
    "http": {"port": 8080, "path": "/ping"},
    "delay_seconds": 5.0,
    "interval_seconds": 3.0,
    "timeout_seconds": 2.0,
    "grace_period_seconds": 7.0,
    "consecutive_failures": 4,
}


async def test_a_live_tasks_health_check_and_kill_policy_are_in_get_tasks_and_state(
    tmp_path: Path,
) -> None:
    async with stream_rig(tmp_path) as rig:
        s = MesosScheduler(rig.master.web_ui, rig.auth)
        try:
            assert await s.subscribe(framework_info("team-a")) == 200
            [offer] = (await next_of(s, "OFFERS"))["offers"][:1]
            task: dict[str, Any] = {
                "name": "web",
                "task_id": {"value": "web-1"},
                "agent_id": offer["agent_id"],
                "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}}],
                "command": {"value": "python3 -m http.server 8080"},
                "health_check": CHECK,
                "kill_policy": {"grace_period": {"nanoseconds": 9_000_000_000}},
            }
            launch = {"type": "LAUNCH", "launch": {"task_infos": [task]}}
            status, _ = await s.call("ACCEPT", {"offer_ids": [offer["id"]], "operations": [launch]})
            assert status == 202
            await eventually(lambda: any(fw.tasks for fw in rig.master.books.frameworks.values()))
            secret = (tmp_path / "auth" / "secrets" / "ops").read_text().strip()
            auth = basic("ops", secret)  # (the operator's credentials)
            async with aiohttp.ClientSession() as session:
                async with session.post(
                    rig.master.web_ui + "api/v1",
                    data=json.dumps({"type": "GET_TASKS"}).encode(),
                    headers={"Content-Type": "application/json", "Authorization": auth},
                ) as r:
                    assert r.status == 200
                    [got] = (await r.json())["get_tasks"]["tasks"]
                async with session.get(
                    rig.master.web_ui + "master/state", headers={"Authorization": auth}
                ) as r:
                    assert r.status == 200
                    state = await r.json()
            [fw] = state["frameworks"]
            [v0] = fw["tasks"]
            for view, shown in (("GET_TASKS", got), ("/master/state", v0)):
                check = shown.get("health_check")
                assert check is not None, f"{view} shows no health_check of a live task"
                assert check["type"] == "HTTP", view
                assert check["http"]["port"] == 8080, view
                assert check["interval_seconds"] == 3.0, view
                assert check["consecutive_failures"] == 4, view
                policy = shown.get("kill_policy")
                assert policy == {"grace_period": {"nanoseconds": 9_000_000_000}}, view
        finally:
            await s.close()
