"""`drfmesos run` says a task's end after the last lines it wrote (long-running.md shows
`flushed` from a SIGTERM trap before `run-0 TASK_KILLED`); it said the end as the update
came, and the task's last lines, read from its sandbox after, came below it."""

from __future__ import annotations

import asyncio

from frameworks.job import JobScheduler, JobSpec
from protocol.wire.messages import TaskState, TaskStatus
from protocol.wire.resources import Resources


async def test_the_end_of_a_task_that_ran_waits_for_its_output() -> None:
    said: list[str] = []
    job = JobScheduler(JobSpec(name="run", command="x", resources=Resources(cpus=1)), said.append)
    job.statuses["run-0"] = TaskStatus(task_id="run-0", state=TaskState.STAGING, slave_id="s1")
    job.ended["run-0"] = asyncio.Event()
    for state in (TaskState.RUNNING, TaskState.KILLED):
        status = TaskStatus(task_id="run-0", state=state, slave_id="s1", message="killed")
        await job.status_update(None, status)  # type: ignore[arg-type]
    assert job.ended["run-0"].is_set()
    assert said == []  # its output is read first
    job.say_end("run-0")
    job.say_end("run-0")
    assert said == ["run-0 TASK_KILLED: killed"]


async def test_the_end_of_a_task_that_never_ran_is_said_at_once() -> None:
    said: list[str] = []
    job = JobScheduler(JobSpec(name="run", command="x", resources=Resources(cpus=1)), said.append)
    job.statuses["run-0"] = TaskStatus(task_id="run-0", state=TaskState.STAGING, slave_id="s1")
    job.ended["run-0"] = asyncio.Event()
    status = TaskStatus(task_id="run-0", state=TaskState.ERROR, slave_id="s1", message="bad")
    await job.status_update(None, status)  # type: ignore[arg-type]
    assert said == ["run-0 TASK_ERROR: bad"]
