"""Review 64 (on f3e587e): an executor's message budget is one executor's, so a tenant
with many executors on a slave has as many budgets.

slave.message_budget holds each executor to 100 messages and 4 MiB a second, with a burst
of 1,000 and 16 MiB, because an executor's FrameworkMessages go to the master on the
slave's own connection, in the slave principal's queue, ahead of the status updates of
every other tenant's tasks there (review 63's side note). The budget is kept per
(framework, executor) and forgotten when the executor exits: one Accept of EXECUTORS
tasks, each with an executor of its own (an id is the framework's to choose, an executor
as cheap as its task), sends EXECUTORS bursts through the same slave queue, and an
executor started again under the same id starts with a full burst again.

Here one framework's four executors on one slave each send 1,500 messages of 1 KB at
once: the slave passes about 4,000 of them to the master in the time it passes 1,000 for
one executor. Expected: a tenant on a slave is held to the budget once (its principal's,
or its framework's), whatever number of executors it starts: fewer than 2,000 pass."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from protocol.tooling.brokers import MosquittoBroker
from protocol.wire.messages import CommandInfo, ExecutorInfo, FrameworkMessage, TaskInfo, TaskState
from protocol.wire.resources import Resources
from slave.message_budget import MESSAGES_AT_ONCE

from harness.slave import Rig, master_rig

pytestmark = pytest.mark.timeout(90)

EXECUTORS = 4
SENT = 1_500
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


async def test_a_tenants_executors_on_a_slave_share_one_budget(rig: Rig, tmp_path: Path) -> None:
    script = tmp_path / "flood.py"
    script.write_text(FLOOD)
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    offer = await fw.next_offer()
    tasks = [
        TaskInfo(
            task_id=f"flood-{i}",
            slave_id=offer.slave_id,
            resources=Resources(cpus=0.25, mem=64),
            executor=ExecutorInfo(
                executor_id=f"flood-{i}", command=CommandInfo(value=f"{sys.executable} {script}")
            ),
        )
        for i in range(EXECUTORS)
    ]
    await fw.accept(offer, tasks, refuse=0)
    for i in range(EXECUTORS):  # (each end comes after what its executor said before it)
        await fw.update_for(f"flood-{i}", TaskState.FINISHED, timeout=60)
    heard = len(fw.inbox.of(FrameworkMessage))
    assert heard < 2 * MESSAGES_AT_ONCE, (
        f"{heard} of {EXECUTORS} x {SENT} messages passed: each executor had its own burst"
    )
