"""A command task's health check outlives its slave: the slave process is SIGKILLed and
restarted on its work dir, recovers the task, and checks it again (as it did: a COMMAND
check in the task's sandbox) from where its checks were, as Mesos's checker, which
outlives its agent, goes on: its verdict is not said again, a change is."""

from __future__ import annotations

from pathlib import Path

from protocol.tooling.brokers import MosquittoBroker
from protocol.wire.messages import (
    CommandCheck,
    CommandInfo,
    HealthCheck,
    HealthCheckType,
    Reason,
    TaskInfo,
    TaskState,
    Update,
)
from protocol.wire.resources import Resources

from harness.fakes import FakeFramework
from harness.slave import restartable_slave

CHECK = HealthCheck(
    type=HealthCheckType.COMMAND,
    command=CommandCheck(value="test -f ready"),
    delay_seconds=0,
    interval_seconds=1,
    grace_period_seconds=0,
    consecutive_failures=1000,  # (said, never killed for it)
)


async def verdict(fw: FakeFramework, healthy: bool, after: int) -> None:
    """A health update saying `healthy`, beyond the first `after` updates."""

    def found() -> bool:
        return any(
            u.status.reason == Reason.TASK_HEALTH_CHECK_STATUS_UPDATED
            and u.status.healthy is healthy
            for u in fw.inbox.of(Update)[after:]
        )

    await fw.inbox.wait_until(found, timeout=90)


async def test_a_recovered_tasks_health_check_runs_again(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    async with restartable_slave(mosquitto, tmp_path) as slave:
        fw = await slave.rig.framework()
        await slave.start()
        offer = await fw.next_offer(timeout=90)
        task = TaskInfo(
            task_id="checked",
            slave_id=offer.slave_id,
            resources=Resources(cpus=0.25, mem=64),
            command=CommandInfo(value="sleep 300"),
            health_check=CHECK,
        )
        await fw.accept(offer, [task], refuse=0)
        await fw.update_for("checked", TaskState.RUNNING, timeout=90)
        await verdict(fw, False, 0)  # no `ready` yet
        sandbox = slave.work / "sandboxes" / fw.framework_id / "checked"
        (sandbox / "ready").touch()
        await verdict(fw, True, 0)

        await slave.crash()  # the task runs on without its slave
        await slave.start()
        before = len(fw.inbox.of(Update))
        (sandbox / "ready").unlink()
        await verdict(fw, False, before)  # checked again: a change, from the restarted slave
        heard = {u.status.uuid for u in fw.inbox.of(Update)[:before]}
        after = fw.inbox.of(Update)[before:]
        assert not [u for u in after if u.status.state.terminal]
        # its verdict (healthy) was kept, not said again as a new one (an update of the
        # last run's re-sent, its acknowledgement cut off by the SIGKILL, is not new)
        assert not [
            u
            for u in after
            if u.status.reason == Reason.TASK_HEALTH_CHECK_STATUS_UPDATED
            and u.status.healthy
            and u.status.uuid not in heard
        ]
