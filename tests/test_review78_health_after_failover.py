"""A new leading master never learns a running task's health: the state, /metrics and
reconciliation say nothing of it until its verdict next changes.

Scenario: a long-running service with a health check runs, healthy, on a slave. The
master fails over (a new leader reads the registry; the slave re-registers with its
tasks; the framework subscribes again). The service stays healthy.

Mesos: an agent re-registers with each task's latest status (`Task.statuses`, with
`healthy`), so the new master's state, `/master/state`, GET_TASKS and a reconciliation
answer say the task is healthy as they did. docs/how-to/long-running.md: "The verdict
is in the master's state (each task's `healthy`), in Mesos's JSON (a status's
`healthy`) and in `/metrics` (`drfmesos_tasks_health{health="healthy"}` ...)".

drfmesos: the slave's `Reregister` carries each task as a `RunningTask` (its info and
state, no status and no verdict), the new master books it with no status
(`SlaveCalls._reconcile_slave`), and the slave says a verdict only when it changes
(`CommandTasks._check_health`): for a service that stays healthy, the new leader's
`healthy` is None for ever, and `drfmesos_tasks_health{health="healthy"}` drops to 0.

Why a user relies on it: an operator watches the healthy count on /metrics and alerts
when it falls; a failover makes every healthy service look unchecked. A framework that
reconciles after the failover (Marathon does) reads no `healthy` and cannot tell a
healthy instance from one whose check never passed.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from master.ha.registry import MemoryStore, Registry
from master.master import Master, MasterConfig
from protocol.transport.memory import MemoryBroker
from protocol.wire.messages import (
    CommandCheck,
    CommandInfo,
    HealthCheck,
    HealthCheckType,
    Offers,
    Reason,
    TaskInfo,
    TaskState,
    Update,
)
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics
from slave.slave import Slave, SlaveConfig

from harness.fakes import FakeFramework
from harness.helpers import eventually, kill_processes_under, open_transport, start_master

T = Topics("r78health")
HEALTHY = HealthCheck(
    type=HealthCheckType.COMMAND,
    command=CommandCheck(value="true"),
    delay_seconds=0,
    interval_seconds=1,
    grace_period_seconds=0,
)
pytestmark = pytest.mark.timeout(60)


async def test_a_new_leader_knows_a_healthy_task_is_healthy(tmp_path: Path) -> None:
    broker = MemoryBroker()
    connect = broker.connector(None)
    registry = MemoryStore()
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(kill_processes_under, tmp_path / "s1")  # (last: whatever is left)

        async def leader(name: str) -> Master:
            kept = Registry(registry)
            await kept.load()
            config = MasterConfig(allocation_interval=0.05, heartbeat_interval=0.5)
            return await start_master(stack, connect, T, config, name, registry=kept)

        master = await leader("master-1")
        bus = await open_transport(stack, connect, "s1", inbox=T.slave("slave", "s1"))
        config = SlaveConfig(
            slave_id="s1",
            hostname="s1.local",
            resources=Resources(cpus=2, mem=512),
            work_dir=tmp_path / "s1",
            cluster=T.cluster,
            kill_grace=0.5,
        )
        slave = Slave(bus, T, config)
        await slave.start()
        stack.push_async_callback(slave.stop, kill_tasks=True)

        fw_bus = await open_transport(stack, connect, "fw", inbox=T.framework("framework", "fw"))
        fw = FakeFramework(fw_bus, T, "fw", acknowledging=True)
        await fw_bus.subscribe(T.framework("framework", "fw"), fw.receive)
        fid = (await fw.subscribe("fw", failover_timeout=60)).framework_id
        offer = (await fw.inbox.wait_for(Offers, lambda o: bool(o.offers), 20)).offers[0]
        task = TaskInfo(
            task_id="svc",
            slave_id="s1",
            resources=Resources(cpus=0.25, mem=64),
            command=CommandInfo(value="sleep 300"),
            health_check=HEALTHY,
        )
        await fw.accept(offer, [task], refuse=0)
        await fw.inbox.wait_until(
            lambda: any(
                u.status.reason == Reason.TASK_HEALTH_CHECK_STATUS_UPDATED and u.status.healthy
                for u in fw.inbox.of(Update)
            ),
            20,
        )
        assert master.books.frameworks[fid].tasks["svc"].view().healthy is True

        await master.stop()  # the leader dies; a new one reads the registry and leads
        await master.bus.close()
        master = await leader("master-2")
        await fw.subscribe("fw", framework_id=fid, failover_timeout=60)
        await eventually(
            lambda: fid in master.books.frameworks and "svc" in master.books.frameworks[fid].tasks,
            20,
        )
        assert master.books.frameworks[fid].tasks["svc"].state == TaskState.RUNNING

        # five of its checks later, still healthy: the new leader should say so
        await eventually(
            lambda: master.books.frameworks[fid].tasks["svc"].view().healthy is True, 5
        )
