"""Review 58 (older than today's change, found beside it): a slave shuts a torn-down
framework's custom executors down one after another INSIDE its ShutdownFramework handler
(`Slave._on_shutdown_framework`: `await executor.shutdown(kill_grace)` in a loop), and a
slave's messages are handled one at a time. An executor that neither registers nor
answers SIGTERM takes two kill graces (the wait after the ask, the wait after SIGTERM)
before its SIGKILL. So a tenant that runs N such executors on a slave (an executor's
resources are the framework's to write: tiny) and tears its framework down holds the
slave's whole inbox for 2 x N x --kill-grace: every other tenant's launch, kill and file
read there waits. (Its tasks' kills run beside the slave's other work, "so that the
slave's inbox is not held": its executors' do not.)

On a real slave and broker (the rig of tests/test_slave.py: --kill-grace 1 s)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from protocol.tooling.brokers import MosquittoBroker
from protocol.wire.messages import CommandInfo, ExecutorInfo, TaskInfo, TaskState, Teardown
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.slave import Rig, T, master_rig

pytestmark = pytest.mark.timeout(90)
EXECUTORS = 4  # each 2 s of the slave's inbox (two graces of 1 s)
STUBBORN = "trap '' TERM; while :; do sleep 0.05; done"  # never registers, ignores SIGTERM


@pytest.fixture
async def rig(mosquitto: MosquittoBroker, tmp_path: Path) -> AsyncIterator[Rig]:
    async with master_rig(mosquitto, tmp_path) as r:
        yield r


async def test_a_teardown_of_stubborn_executors_does_not_hold_the_slaves_inbox(rig: Rig) -> None:
    mallory = await rig.framework("mallory")
    slave = await rig.start_slave("s1", Resources(cpus=4, mem=2048))
    offer = await mallory.next_offer()
    tasks = [
        TaskInfo(
            task_id=f"m{i}",
            slave_id="s1",
            resources=Resources(cpus=0.1, mem=16),
            executor=ExecutorInfo(
                executor_id=f"e{i}",
                command=CommandInfo(value=STUBBORN),
                resources=Resources(cpus=0.01, mem=8),
            ),
        )
        for i in range(EXECUTORS)
    ]
    await mallory.accept(offer, tasks, refuse=0)
    await eventually(lambda: len(slave.executors) == EXECUTORS)
    alice = await rig.framework("alice")
    await mallory.bus.publish(
        T.inbound("framework", "framework"), Teardown(framework_id=mallory.framework_id)
    )
    await eventually(lambda: mallory.framework_id not in rig.master.books.frameworks)

    # alice launches a plain task on the slave meanwhile
    started = asyncio.get_running_loop().time()
    await rig.launch(alice, "sleep 30", "a0", Resources(cpus=0.5, mem=64))
    await alice.update_for("a0", TaskState.RUNNING, timeout=60)
    waited = asyncio.get_running_loop().time() - started
    in_grace = [k for k in slave.executors if k[0] == mallory.framework_id]
    assert in_grace, (
        f"alice's task ran only once all of mallory's {EXECUTORS} executors were gone "
        f"({waited:.1f}s): the slave's inbox was held while it shut them down one after "
        "another"
    )
