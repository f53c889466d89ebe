"""A framework's kill of a task whose slave is away is lost: the task runs on after the
slave is back, and its framework never hears TASK_KILLED.

Scenario: a framework kills one of its long-running tasks while the task's slave process
is down (restarting for an upgrade, or crashed and restarted by systemd); the master has
seen it go (its last will) but keeps its tasks, waiting for it (`slave_timeout`). The
slave comes back within that time and recovers the task.

Mesos: `Master::kill` records the kill in the agent's `killedTasks` even when the agent
is disconnected ("Kill will be retried if the agent reregisters"), and on
re-registration (`reconcileKnownSlave`) sends a KillTaskMessage for every such task
still alive there; the framework hears TASK_KILLED.

drfmesos: `FrameworkCalls.on_kill` publishes the KillTask to the slave's topic whether
or not the slave is connected and keeps no record of it; the restarted slave never gets
it, and `SlaveCalls` re-sends nothing when the slave re-registers (only a drain's kills,
and a partition-aware framework's `kills_owed` for a slave that was removed). The task
runs on, holding its resources and ports, while its framework waits for an end that
never comes.

Why a user relies on it: a framework that scales a service down, or replaces a task,
kills it and waits for TASK_KILLED before it launches the replacement or tells its
user the old one is gone; a slave restart in that window (every rolling upgrade) leaves
the task running and the framework stuck, unless it happens to reconcile and kill again.
"""

from __future__ import annotations

from pathlib import Path

from protocol.tooling.brokers import MosquittoBroker
from protocol.wire.messages import CommandInfo, Kill, TaskInfo, TaskState
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.slave import restartable_slave


async def test_a_kill_sent_while_the_slave_is_away_ends_the_task_when_it_is_back(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    async with restartable_slave(mosquitto, tmp_path) as slave:
        fw = await slave.rig.framework()
        await slave.start()
        offer = await fw.next_offer(timeout=60)
        task = TaskInfo(
            task_id="svc",
            slave_id=offer.slave_id,
            resources=Resources(cpus=0.25, mem=64),
            command=CommandInfo(value="sleep 300"),
        )
        await fw.accept(offer, [task], refuse=0)
        await fw.update_for("svc", TaskState.RUNNING, timeout=60)

        await slave.crash()  # the slave is restarted (an upgrade, a crash)
        book = slave.rig.master.books.slaves[offer.slave_id]
        await eventually(lambda: not book.connected, 10)  # its last will: the master knows
        await fw.bus.publish(fw.to_master, Kill(framework_id=fw.framework_id, task_id="svc"))
        await slave.start()

        # back within its slave_timeout: the kill reaches it (the slave's default grace: 3 s)
        await fw.update_for("svc", TaskState.KILLED, timeout=12)
