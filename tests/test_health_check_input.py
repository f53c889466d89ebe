"""A task's COMMAND health check whose variables no environment can hold (a NUL in a
value, '=' in a name): refused as its task is launched, as the same variables in the
task's own command are (TASK_ERROR), or else checked -- never a check that dies on the
slave at its first run while its task runs on unchecked and its framework hears nothing.
A real broker, master and slave in process."""

from __future__ import annotations

import pytest

from protocol.wire.messages import (
    CommandCheck,
    HealthCheck,
    HealthCheckType,
    TaskState,
    Update,
)
from protocol.wire.resources import Resources

from harness.slave import Rig
from harness.slave import rig as rig


@pytest.mark.parametrize("env", [{"BAD": "a\0b"}, {"A=B": "x"}], ids=["nul-value", "eq-name"])
async def test_a_check_whose_variables_no_environment_holds_is_refused_or_run(
    rig: Rig, env: dict[str, str]
) -> None:
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    check = HealthCheck(
        type=HealthCheckType.COMMAND,
        command=CommandCheck(value="exit 7", environment=env),
        delay_seconds=0,
        interval_seconds=1,
        timeout_seconds=5,
        grace_period_seconds=0,
        consecutive_failures=1,
    )
    await rig.launch(fw, "sleep 300", "checked", health_check=check)
    # refused (TASK_ERROR), or checked: its one failure kills it (TASK_KILLED)
    ended = await fw.inbox.wait_for(
        Update, lambda u: u.status.task_id == "checked" and u.status.state.terminal, timeout=20
    )
    assert ended.status.state in (TaskState.ERROR, TaskState.KILLED), ended.status
