"""A tenant's custom executor that reports its tasks' states as fast as it can is paced by
the slave (slave.message_budget.UpdatePace), not served at the cost of every other
tenant's tasks there: past its principal's burst the slave reads its updates at the rate,
loses none of them, and runs another tenant's task meanwhile. (Unpaced, such an executor
took the slave's whole core, and another tenant's `true` task waited 862 ms at the
median and up to 20 s.)"""

from __future__ import annotations

import sys

import pytest

import slave.executor_side
from protocol.transport.aio import loop_time
from protocol.wire.messages import CommandInfo, ExecutorInfo, RunTasks, TaskInfo, TaskState
from protocol.wire.resources import Resources

from harness.shared_slave import ALICE, MALLORY, T, shared_slave

UPDATES = 600
RATE, BURST = 200.0, 100.0

FLOOD = f"""
import asyncio
from frameworks.executor import Executor, ExecutorDriver
from protocol.wire.messages import TaskStatus, TaskState
class Flood(Executor):
    async def launch_task(self, driver, task):
        driver.spawn(self.flood(driver, task.task_id))
    async def flood(self, driver, task_id):
        for n in range({UPDATES}):
            await driver.send_status_update(
                TaskStatus(task_id=task_id, state=TaskState.RUNNING, message=str(n)))
        await driver.send_status_update(TaskStatus(task_id=task_id, state=TaskState.FINISHED))
asyncio.run(ExecutorDriver(Flood()).run())
"""


async def test_an_executor_flooding_status_updates_is_paced_and_loses_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(slave.executor_side, "UPDATES_A_SECOND", RATE)
    monkeypatch.setattr(slave.executor_side, "UPDATES_AT_ONCE", BURST)
    # (the executor is this Python, as the slave's own user: what is measured is the pace)
    async with shared_slave(switch_user=False, pid_namespace=False) as s:
        executor = ExecutorInfo(
            executor_id="flood",
            command=CommandInfo(value=f"{sys.executable} -c '{FLOOD}'"),
            resources=Resources(cpus=0.1, mem=64),
        )
        task = TaskInfo(
            task_id="f1",
            slave_id=s.master.slave_id,
            resources=Resources(cpus=0.1, mem=32),
            executor=executor,
        )
        await s.master.bus.publish(
            T.slave("slave", s.master.slave_id),
            RunTasks(framework_id=ALICE, tasks=[task], principal="alice"),
        )
        await s.master.reaches(ALICE, "f1", TaskState.RUNNING)
        began = loop_time()
        # another tenant's task runs to its end while the flood goes on
        await s.master.run("mallory", MALLORY, "m1", "true")
        await s.master.ends(MALLORY, "m1")
        assert not s.master.states(ALICE, "f1")[-1].terminal
        end = await s.master.ends(ALICE, "f1", timeout=60)
        took = loop_time() - began
    assert end.state == TaskState.FINISHED  # none lost: its end came, after all the rest
    # past its burst, the rest came at the pace (a floor: a slow machine only adds to it)
    assert took >= (UPDATES + 1 - BURST) / RATE * 0.9
