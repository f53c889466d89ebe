"""A drain's grace bound (`max_grace_period`, sent as ShutdownFramework's `grace_cap`)
holds for a shut-down framework's custom executors too, not only for its tasks: an
executor that neither answers its ShutdownExecutor nor SIGTERM is SIGKILLed after the
cap, not after the slave's two kill graces. Else a drain with grace 0 left a tenant's
stubborn executor (and the room it holds) running for 2 x --kill-grace.

On a real slave and broker (the rig of tests/test_slave.py), --kill-grace 30 s."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from protocol.tooling.brokers import MosquittoBroker
from protocol.wire.messages import ShutdownFramework

from harness.helpers import eventually
from harness.slave import Rig, master_rig, stubborn_executor

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
async def rig(mosquitto: MosquittoBroker, tmp_path: Path) -> AsyncIterator[Rig]:
    async with master_rig(mosquitto, tmp_path) as r:
        yield r


@pytest.mark.parametrize("torn_down_first", [False, True])
async def test_a_drains_grace_cap_cuts_a_stubborn_executors_shutdown(
    rig: Rig, torn_down_first: bool
) -> None:
    mallory, slave, executor, proc = await stubborn_executor(rig, kill_grace=30.0)
    fid = mallory.framework_id

    if torn_down_first:  # its shutdown begun with the slave's grace, a teardown's
        await slave._on_shutdown_framework(ShutdownFramework(framework_id=fid), None)
        await eventually(lambda: executor.shutting_down)
    # the master's ShutdownFramework for a drain of grace 0 (master/calls/drains.py)
    await slave._on_shutdown_framework(ShutdownFramework(framework_id=fid, grace_cap=0.0), None)
    # (its two graces of 30 s each would be a minute; the cap's are at once)
    await eventually(lambda: proc.returncode is not None, timeout=15)
