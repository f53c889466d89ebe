"""Newcomer 88: `GET /api/v1/tasks?state=FINISHED` was answered `unknown state
'FINISHED'`, without a word of what the states are called (Mesos's names,
`TASK_FINISHED`); a wrong `sort=` is answered with the sorts there are. Now a state
named without its `TASK_` is answered with the name meant, and any other with them all.
"""

from __future__ import annotations

from test_http_api import Live
from test_http_api import live as live


async def test_a_task_state_misnamed_in_the_tasks_filter_is_answered_with_the_right_name(
    live: Live,
) -> None:
    status, said = await live.get("/api/v1/tasks?state=finished")
    assert status == 400
    assert said["error"] == "unknown state 'finished': did you mean TASK_FINISHED?"
    status, said = await live.get("/api/v1/tasks?state=done")
    assert status == 400
    assert "one of TASK_STAGING, TASK_STARTING, TASK_RUNNING," in said["error"]
    status, said = await live.get("/api/v1/tasks?state=TASK_FINISHED")
    assert status == 200
    assert said["tasks"] == []
