"""An executor's messages to its framework are held to a budget (slave.message_budget):
they travel on its slave's connection to the master, ahead of the status updates of every
other tenant's tasks there, and an executor is a tenant's code."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from protocol.tooling.brokers import MosquittoBroker
from protocol.wire.messages import CommandInfo, ExecutorInfo, FrameworkMessage, TaskInfo, TaskState
from protocol.wire.resources import Resources
from slave.message_budget import MESSAGES_AT_ONCE, MessageBudget

from harness.slave import Rig, master_rig

SENT = 3_000
FLOOD = f"""
import asyncio
from frameworks.executor import Executor, ExecutorDriver
from protocol.wire.messages import TaskState, TaskStatus

class Flood(Executor):
    async def launch_task(self, driver, task):
        await driver.send_status_update(TaskStatus(task_id=task.task_id, state=TaskState.RUNNING))
        for i in range({SENT}):
            await driver.send_framework_message(b"x" * 1000)
        await driver.send_status_update(TaskStatus(task_id=task.task_id, state=TaskState.FINISHED))

asyncio.run(ExecutorDriver(Flood()).run())
"""


@pytest.fixture
async def rig(mosquitto: MosquittoBroker, tmp_path: Path) -> AsyncIterator[Rig]:
    async with master_rig(mosquitto, tmp_path) as r:
        yield r


def test_a_budget_passes_a_burst_then_its_rate() -> None:
    budget = MessageBudget()
    passed = sum(budget.take(100, now=0.0) for _ in range(2 * int(MESSAGES_AT_ONCE)))
    assert passed == MESSAGES_AT_ONCE
    assert budget.dropped == MESSAGES_AT_ONCE
    assert sum(budget.take(100, now=1.0) for _ in range(1_000)) == 100  # a second's worth
    big = MessageBudget()
    assert big.take(15 * 2**20, now=0.0)
    assert not big.take(2 * 2**20, now=0.0)  # past 16 MiB at once
    assert big.take(2 * 2**20, now=1.0)  # 4 MiB came back in a second


async def test_an_executor_that_floods_its_framework_is_held_to_its_budget(
    rig: Rig, tmp_path: Path
) -> None:
    script = tmp_path / "flood.py"
    script.write_text(FLOOD)
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    offer = await fw.next_offer()
    task = TaskInfo(
        task_id="flood",
        slave_id=offer.slave_id,
        resources=Resources(cpus=0.25, mem=64),
        executor=ExecutorInfo(
            executor_id="flood", command=CommandInfo(value=f"{sys.executable} {script}")
        ),
    )
    await fw.accept(offer, [task], refuse=0)
    # its end comes after what it said before it, on the same lines
    await fw.update_for("flood", TaskState.FINISHED, timeout=60)
    heard = len(fw.inbox.of(FrameworkMessage))
    assert MESSAGES_AT_ONCE <= heard < SENT, heard
