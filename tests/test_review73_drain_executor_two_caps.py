"""Review 73: a drain's grace cap of more than 0 leaves a stubborn custom executor running
for twice the cap.

d06eaf3 ("A drain's grace cap holds for a shut-down framework's custom executors too"):
"an executor that neither answers its ShutdownExecutor nor SIGTERM is SIGKILLed after the
cap". `Executor.shutdown(grace)` waits `grace` after its ShutdownExecutor (sent or not: an
executor that never registered is asked nothing, and waited for all the same), then sends
SIGTERM and waits `grace` again before SIGKILL: the cap, given as that grace, is spent
twice. tests/test_drain_executor_grace.py drains with a cap of 0, where twice is nothing.
A drain with `max_grace_period` of 3 s leaves a tenant's stubborn executor (and the room it
holds, the slave the operator wants emptied) 6 s; one of 60 s, two minutes. A command
task under the same drain gets the cap once (SIGTERM, then SIGKILL after it).

What an operator relies on (Mesos's DrainConfig.max_grace_period): nothing of the drained
slave runs longer than the cap after the drain reaches it.

On a real slave and broker (the rig of tests/test_slave.py), --kill-grace 30 s.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from protocol.tooling.brokers import MosquittoBroker
from protocol.wire.messages import ShutdownFramework

from harness.helpers import eventually
from harness.slave import Rig, master_rig, stubborn_executor

pytestmark = pytest.mark.timeout(90)
CAP = 3.0  # the drain's max_grace_period
SLACK = 1.5  # what the slave and this test's polling may add on a loaded machine


@pytest.fixture
async def rig(mosquitto: MosquittoBroker, tmp_path: Path) -> AsyncIterator[Rig]:
    async with master_rig(mosquitto, tmp_path) as r:
        yield r


async def test_a_drains_grace_cap_is_spent_once_on_a_stubborn_executor(rig: Rig) -> None:
    mallory, slave, _, proc = await stubborn_executor(rig, kill_grace=30.0)
    fid = mallory.framework_id

    # the master's ShutdownFramework for a drain of max_grace_period CAP
    started = time.monotonic()
    await slave._on_shutdown_framework(ShutdownFramework(framework_id=fid, grace_cap=CAP), None)
    await eventually(lambda: proc.returncode is not None, timeout=4 * CAP)
    took = time.monotonic() - started
    assert took < CAP + SLACK, (
        f"a drain capped at {CAP:g} s left the stubborn executor {took:.1f} s "
        f"(SIGKILLed: {proc.returncode})"
    )
