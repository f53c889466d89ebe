"""Health checks of a custom executor's tasks, on a real broker, master and slave, with a
real executor process (tests/programs/web_executor.py): the SDK's executor driver runs
each task's check, as the slave runs a command task's (tests/test_health_checks.py). A
task whose HTTP check starts failing is reported unhealthy and killed, with its kill
grace, after its consecutive failures; one that stays healthy is reported healthy once;
the master's state and /metrics show both."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from master.http.metrics import exposition, registry_for
from protocol.tooling.brokers import MosquittoBroker
from protocol.tooling.ports import free_port
from protocol.wire.messages import (
    CommandCheck,
    CommandInfo,
    ExecutorInfo,
    FrameworkCapability,
    HealthCheck,
    HealthCheckType,
    HTTPCheck,
    Kill,
    KillPolicy,
    TaskInfo,
    TaskState,
    TaskStatus,
)
from protocol.wire.resources import Resources

from harness.fakes import FakeFramework
from harness.health import HEALTH, statuses, verdict
from harness.helpers import eventually
from harness.slave import Rig, T, master_rig

WEB_EXECUTOR = f"{sys.executable} {Path(__file__).parent / 'programs' / 'web_executor.py'}"


@pytest.fixture
async def rig(mosquitto: MosquittoBroker, tmp_path: Path) -> AsyncIterator[Rig]:
    async with master_rig(mosquitto, tmp_path) as r:
        yield r


async def launch_web(
    rig: Rig, fw: FakeFramework, task_id: str, port: int, **fields: object
) -> Path:
    """A task of the web executor that serves HTTP on `port`, checked every second
    (`/health`, two failures kill it, unless `health_check` says); its sandbox."""
    offer = await fw.next_offer(after=rig.offers_used(fw))
    check = HealthCheck(
        type=HealthCheckType.HTTP, http=HTTPCheck(port=port, path="/health"),
        delay_seconds=0, interval_seconds=1, timeout_seconds=1,
        grace_period_seconds=5, consecutive_failures=2,
    )  # fmt: skip
    fields = {"health_check": check, **fields}
    task = TaskInfo(
        task_id=task_id,
        slave_id=offer.slave_id,
        resources=Resources(cpus=0.1, mem=64),
        executor=ExecutorInfo(executor_id="web", command=CommandInfo(value=WEB_EXECUTOR)),
        data=json.dumps({"port": port}).encode(),
        **fields,  # type: ignore[arg-type]
    )
    await fw.accept(offer, [task], refuse=0)
    return rig.tmp / offer.slave_id / "sandboxes" / fw.framework_id / task_id


async def executor_verdict(fw: FakeFramework, task_id: str, healthy: bool) -> TaskStatus:
    status = await verdict(fw, task_id, healthy)
    assert status.executor_id == "web"  # (its executor's task, not a command task)
    return status


def health_metric(rig: Rig, health: str) -> str:
    metrics = exposition(registry_for(rig.master.views)).decode()
    return next(line for line in metrics.splitlines() if f'health="{health}"' in line)


async def test_an_executor_task_whose_http_check_starts_failing_is_reported_and_killed(
    rig: Rig,
) -> None:
    fw = await rig.framework(capabilities=[FrameworkCapability.TASK_KILLING_STATE])
    await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    port = free_port()
    sandbox = await launch_web(rig, fw, "web", port, kill_policy=KillPolicy(grace_period=2.5))
    healthy = await executor_verdict(fw, "web", True)
    assert healthy.message == "its health check passed"
    view = next(t for t in rig.master.views.state().tasks if t.task_id == "web")
    assert view.healthy is True
    assert health_metric(rig, "healthy") == 'drfmesos_tasks_health{health="healthy"} 1.0'

    (sandbox / "sick").touch()
    answer = f"GET http://127.0.0.1:{port}/health answered 500"
    sick = await executor_verdict(fw, "web", False)
    assert sick.message == f"its health check failed: {answer}"
    killed = await fw.update_for("web", TaskState.KILLED, timeout=20)
    assert killed.healthy is False
    assert killed.message == f"killed: its health check failed 2 times in a row: {answer}"
    assert (sandbox / "grace").read_text() == "2.5"  # the task's kill grace, its executor's
    # one update a change of verdict; TASK_KILLING first, as the framework asked; no more
    assert [s.healthy for s in statuses(fw, "web") if s.reason == HEALTH] == [True, False]
    assert [s.state for s in statuses(fw, "web")][-2:] == [TaskState.KILLING, TaskState.KILLED]
    assert health_metric(rig, "unhealthy") == 'drfmesos_tasks_health{health="unhealthy"} 0.0'


async def test_an_executor_task_that_stays_healthy_is_reported_healthy_once(rig: Rig) -> None:
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    sandbox = await launch_web(rig, fw, "calm", free_port())
    await executor_verdict(fw, "calm", True)

    def gets() -> int:
        try:
            return int((sandbox / "gets").read_text() or 0)
        except (OSError, ValueError):
            return 0

    await eventually(lambda: gets() >= 4, timeout=20)  # three checks passed since its first
    assert health_metric(rig, "healthy") == 'drfmesos_tasks_health{health="healthy"} 1.0'
    kill = Kill(framework_id=fw.framework_id, task_id="calm")
    await fw.bus.publish(T.inbound("framework", "framework"), kill)
    killed = await fw.update_for("calm", TaskState.KILLED, timeout=20)
    assert killed.healthy is True  # (what its check last said, carried to its end)
    assert (sandbox / "grace").read_text() == "1.0"  # (no policy: its slave's --kill-grace)
    assert [s.healthy for s in statuses(fw, "calm") if s.reason == HEALTH] == [True]


async def test_an_executor_tasks_command_check_runs_in_its_sandbox_and_says_its_code(
    rig: Rig,
) -> None:
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    check = HealthCheck(
        type=HealthCheckType.COMMAND, command=CommandCheck(value="pwd > where; exit 7"),
        delay_seconds=0, interval_seconds=1, timeout_seconds=5,
        grace_period_seconds=0, consecutive_failures=1,
    )  # fmt: skip
    sandbox = await launch_web(rig, fw, "cmd", free_port(), health_check=check)
    killed = await fw.update_for("cmd", TaskState.KILLED, timeout=20)
    assert killed.healthy is False
    assert killed.message == (
        "killed: its health check failed 1 times in a row: the command exited with code 7"
    )
    assert (sandbox / "where").read_text().strip() == str(sandbox.resolve())
