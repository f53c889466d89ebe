"""A kill in its grace is forgotten by a slave that restarts: the task runs on for ever.

Scenario: a long-running service (it traps SIGTERM to flush its state, as the how-to's
example does; here it ignores it) has a kill policy of 3 s and a health check. Its
framework asked for TASK_KILLING (Mesos's TASK_KILLING_STATE). The check fails, the
slave begins the kill (TASK_KILLING, SIGTERM), and during the grace the operator
restarts the slave (an upgrade; here SIGKILL, as a crash).

Mesos: the kill is the command executor's, a process of its own that the agent's restart
does not touch; it sends SIGKILL when the grace is over and TASK_KILLED reaches the
framework once the agent is back. docs/how-to/long-running.md: "After
`consecutive_failures` failures in a row the task is killed with its kill policy's grace
and ends `TASK_KILLED`"; docs/how-to/maintenance.md says the slave restarted mid-drain
kills again, and nothing says a restart cancels a kill.

drfmesos: `Slave.stop` (and a crash) drops the kills in flight (`Kills.cancel`); the
journal holds the task in state TASK_KILLING, and `slave.recovery.recover_task` adopts
its process again but neither resumes the kill nor its health check (that is only for a
RUNNING task). Nobody sends it again (the master re-sends a drain's kills only): the
unhealthy task runs on, holding its resources and its ports, and its framework sees
TASK_KILLING for ever.

Why a user relies on it: a health check exists so that a hung service is replaced; a
framework waits for TASK_KILLED before it launches the replacement (its ports, its
volume), so a lost kill is a service down with no one told.
"""

from __future__ import annotations

from pathlib import Path

from protocol.tooling.brokers import MosquittoBroker
from protocol.wire.messages import (
    CommandCheck,
    CommandInfo,
    FrameworkCapability,
    HealthCheck,
    HealthCheckType,
    KillPolicy,
    TaskInfo,
    TaskState,
)
from protocol.wire.resources import Resources

from harness.slave import restartable_slave

FAILING = HealthCheck(
    type=HealthCheckType.COMMAND,
    command=CommandCheck(value="false"),
    delay_seconds=0,
    interval_seconds=1,
    grace_period_seconds=0,
    consecutive_failures=1,
)
STUBBORN = "trap '' TERM; while :; do sleep 0.1; done"  # (its grace is all used)


async def test_a_health_checks_kill_ends_the_task_across_a_slave_restart(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    async with restartable_slave(mosquitto, tmp_path) as slave:
        fw = await slave.rig.framework(capabilities=[FrameworkCapability.TASK_KILLING_STATE])
        await slave.start()
        offer = await fw.next_offer(timeout=60)
        task = TaskInfo(
            task_id="svc",
            slave_id=offer.slave_id,
            resources=Resources(cpus=0.25, mem=64),
            command=CommandInfo(value=STUBBORN),
            health_check=FAILING,
            kill_policy=KillPolicy(grace_period=3),
        )
        await fw.accept(offer, [task], refuse=0)
        await fw.update_for("svc", TaskState.RUNNING, timeout=60)
        await fw.update_for("svc", TaskState.KILLING, timeout=30)  # its check failed

        await slave.crash()  # mid-grace: the slave crashes, or is upgraded
        await slave.start()

        # its grace (3 s) is long over by then; a slave start takes a few seconds
        status = await fw.update_for("svc", TaskState.KILLED, timeout=15)
        assert status.healthy is False
