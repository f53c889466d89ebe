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


def flood_script(sent: int) -> str:
    """An executor that says `sent` messages of 1 KB to its framework at once, then
    ends its task."""
    return f"""
import asyncio
from frameworks.executor import Executor, ExecutorDriver
from protocol.wire.messages import TaskState, TaskStatus

class Flood(Executor):
    async def launch_task(self, driver, task):
        await driver.send_status_update(TaskStatus(task_id=task.task_id, state=TaskState.RUNNING))
        for i in range({sent}):
            await driver.send_framework_message(b"x" * 1000)
        await driver.send_status_update(TaskStatus(task_id=task.task_id, state=TaskState.FINISHED))

asyncio.run(ExecutorDriver(Flood()).run())
"""


def flooding(slave_id: str, name: str, script: Path) -> TaskInfo:
    """A task of its own executor `name`, which runs `script`."""
    command = CommandInfo(value=f"{sys.executable} {script}")
    return TaskInfo(
        task_id=name,
        slave_id=slave_id,
        resources=Resources(cpus=0.25, mem=64),
        executor=ExecutorInfo(executor_id=name, command=command),
    )


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
    script.write_text(flood_script(SENT))
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    offer = await fw.next_offer()
    task = flooding(offer.slave_id, "flood", script)
    await fw.accept(offer, [task], refuse=0)
    # its end comes after what it said before it, on the same lines
    await fw.update_for("flood", TaskState.FINISHED, timeout=60)
    heard = len(fw.inbox.of(FrameworkMessage))
    assert MESSAGES_AT_ONCE <= heard < SENT, heard


async def test_a_tenants_executors_on_a_slave_share_one_budget(rig: Rig, tmp_path: Path) -> None:
    """Review 64: one framework's 4 executors, each saying 1,500 messages at once, passed
    4,125 when each had a budget of its own (and one started again had it anew)."""
    executors, sent = 4, 1_500
    script = tmp_path / "flood.py"
    script.write_text(flood_script(sent))
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    offer = await fw.next_offer()
    tasks = [flooding(offer.slave_id, f"flood-{i}", script) for i in range(executors)]
    await fw.accept(offer, tasks, refuse=0)
    for i in range(executors):  # (each end comes after what its executor said before it)
        await fw.update_for(f"flood-{i}", TaskState.FINISHED, timeout=60)
    heard = len(fw.inbox.of(FrameworkMessage))
    assert heard < 2 * MESSAGES_AT_ONCE, (
        f"{heard} of {executors} x {sent} messages passed: each executor had its own burst"
    )
