"""review86: an executor's last status update, sent just before it exits, is its task's end
even when the slave paces its principal's updates (slave.message_budget.UpdatePace).

An executor that reports its task FINISHED and then exits is the common shape of one
(pymesos's and ours: the last update, then `driver.stop()`). Past its principal's burst,
the slave reads that executor's line at the pace, so the FINISHED still waited in the line
when the executor's exit was seen: the task was failed there (TASK_FAILED, "executor exited
with status 0") and its true end, read after, was refused as of no task. The exit has to
wait for the line to be read to its end.
"""

from __future__ import annotations

import sys

import pytest

import slave.executor_side
from protocol.wire.messages import CommandInfo, ExecutorInfo, RunTasks, TaskInfo, TaskState
from protocol.wire.resources import Resources

from harness.shared_slave import ALICE, T, shared_slave

UPDATES = 150
RATE, BURST = 100.0, 50.0  # (a second of pace: the 100 updates past the burst)

REPORT_AND_EXIT = f"""
import asyncio
from frameworks.executor import Executor, ExecutorDriver
from protocol.wire.messages import TaskStatus, TaskState
class ReportAndExit(Executor):
    async def launch_task(self, driver, task):
        driver.spawn(self.report(driver, task.task_id))
    async def report(self, driver, task_id):
        for n in range({UPDATES}):
            await driver.send_status_update(
                TaskStatus(task_id=task_id, state=TaskState.RUNNING, message=str(n)))
        await driver.send_status_update(TaskStatus(task_id=task_id, state=TaskState.FINISHED))
        driver.stop()
asyncio.run(ExecutorDriver(ReportAndExit()).run())
"""


async def test_an_executors_last_update_before_its_exit_is_its_tasks_end_when_paced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(slave.executor_side, "UPDATES_A_SECOND", RATE)
    monkeypatch.setattr(slave.executor_side, "UPDATES_AT_ONCE", BURST)
    async with shared_slave(switch_user=False, pid_namespace=False) as s:
        executor = ExecutorInfo(
            executor_id="report-and-exit",
            command=CommandInfo(value=f"{sys.executable} -c '{REPORT_AND_EXIT}'"),
            resources=Resources(cpus=0.1, mem=64),
        )
        task = TaskInfo(
            task_id="r1",
            slave_id=s.master.slave_id,
            resources=Resources(cpus=0.1, mem=32),
            executor=executor,
        )
        await s.master.bus.publish(
            T.slave("slave", s.master.slave_id),
            RunTasks(framework_id=ALICE, tasks=[task], principal="alice"),
        )
        end = await s.master.ends(ALICE, "r1", timeout=30)
    assert (end.state, end.message) == (TaskState.FINISHED, "")
