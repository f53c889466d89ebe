"""Draining a slave through real parts: mosquitto, a slave (in process, or a process that
is SIGKILLed and restarted), real task processes and executors, the master in process.
A draining task gets its kill policy's grace and no more than the drain's; its framework
hears TASK_KILLING and TASK_KILLED with REASON_SLAVE_DRAINING (TASK_GONE_BY_OPERATOR when
the drain marks the slave gone); an executor that ignores the kill is shut down; a slave
that restarts mid-drain is killed on again; and each time the slave ends DRAINED."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from pathlib import Path

import pytest

from master.books import DRAINED
from master.master import Master
from protocol.tooling.brokers import MosquittoBroker
from protocol.transport.aio import within
from protocol.transport.bus import Bus
from protocol.wire.messages import (
    CommandInfo,
    DrainSlave,
    ExecutorInfo,
    FrameworkCapability,
    KillPolicy,
    Reason,
    TaskInfo,
    TaskState,
    Update,
)
from protocol.wire.resources import Resources

from harness.fakes import FakeFramework
from harness.helpers import eventually
from harness.slave import Rig, T, group_members, reap, slave_process
from harness.slave import rig as rig

# a task that takes SIGTERM and carries on: only SIGKILL ends it
STUBBORN = "trap 'echo ignored' TERM; echo up > ready; while :; do sleep 0.05; done"
DEAF_EXECUTOR = f"{sys.executable} {Path(__file__).parent / 'programs' / 'deaf_executor.py'}"


async def drain(rig: Rig, message: DrainSlave) -> None:
    """The call as an operator principal makes it on the bus."""
    async with Bus(rig.broker.url, name="ops", client_id="stest-ops") as ops:
        await ops.publish(T.inbound("operator", "ops"), message)


def drained(master: Master, slave_id: str) -> bool:
    out = master.books.maintenance.get(slave_id)
    return out is not None and out.drain == DRAINED


async def stubborn_task(rig: Rig, fw: FakeFramework, task_id: str, grace: float) -> Path:
    sandbox = await rig.launch(fw, STUBBORN, task_id, kill_policy=KillPolicy(grace_period=grace))
    await fw.update_for(task_id, TaskState.RUNNING, timeout=20)
    await eventually(lambda: (sandbox / "ready").exists())
    return sandbox


@pytest.mark.timing  # a grace measured on the wall clock
async def test_a_draining_task_gets_its_grace_capped_by_the_drain_and_the_slave_drains(
    rig: Rig,
) -> None:
    fw = await rig.framework(capabilities=[FrameworkCapability.TASK_KILLING_STATE])
    slave = await rig.start_slave("s1", Resources(cpus=2, mem=1024), max_kill_grace=60)
    await stubborn_task(rig, fw, "stubborn", grace=30)
    runner = slave.tasks[(fw.framework_id, "stubborn")].runner
    pgid = runner.pid if runner is not None else None
    assert pgid is not None
    await drain(rig, DrainSlave(slave_id="s1", max_grace_period=1.0))
    killing = await fw.update_for("stubborn", TaskState.KILLING, timeout=10)
    assert killing.reason == Reason.SLAVE_DRAINING
    killed = await fw.update_for("stubborn", TaskState.KILLED, timeout=10)
    took = killed.timestamp - killing.timestamp
    assert 1.0 <= took < 2.0, took  # the drain's 1 s, not the task's 30
    assert killed.reason == Reason.SLAVE_DRAINING
    assert "draining" in killed.message
    await eventually(lambda: group_members(pgid) == [])
    await eventually(lambda: drained(rig.master, "s1"))
    assert not rig.master.allocator.slaves["s1"].active


async def test_a_drain_that_marks_the_slave_gone_ends_tasks_gone_by_operator(rig: Rig) -> None:
    fw = await rig.framework(capabilities=[FrameworkCapability.PARTITION_AWARE])
    await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    await stubborn_task(rig, fw, "t", grace=0.2)
    await drain(rig, DrainSlave(slave_id="s1", mark_gone=True))
    gone = await fw.update_for("t", TaskState.GONE_BY_OPERATOR, timeout=10)
    assert gone.reason == Reason.SLAVE_DRAINING
    assert TaskState.KILLED not in {u.status.state for u in fw.inbox.of(Update)}
    await eventually(lambda: "s1" in rig.master.books.gone_slaves)
    assert "s1" not in rig.master.books.slaves


async def test_an_executor_that_ignores_the_drains_kill_is_shut_down(rig: Rig) -> None:
    """A tenant whose executor does not answer the kill keeps nothing on the slave: its
    executor is shut down once the grace and the slave's own have passed."""
    fw = await rig.framework()
    slave = await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    offer = await fw.next_offer()
    task = TaskInfo(
        task_id="deaf",
        slave_id="s1",
        resources=Resources(cpus=0.25, mem=64),
        executor=ExecutorInfo(executor_id="deaf", command=CommandInfo(value=DEAF_EXECUTOR)),
    )
    await fw.accept(offer, [task], refuse=0)
    await fw.update_for("deaf", TaskState.RUNNING, timeout=30)
    executor = slave.executors[(fw.framework_id, "deaf")]
    await drain(rig, DrainSlave(slave_id="s1", max_grace_period=0.5))
    # the rig slave's --kill-grace is 1 s: shut down some 1.5 s on
    killed = await fw.update_for("deaf", TaskState.KILLED, timeout=15)
    assert killed.reason == Reason.SLAVE_DRAINING
    assert executor.pid is not None
    await eventually(lambda: group_members(executor.pid or 0) == [])
    await eventually(lambda: drained(rig.master, "s1"))


async def test_a_drain_carries_on_across_a_slave_restart(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    """The slave process is SIGKILLed while its task ignores the drain's SIGTERM; the
    restarted slave recovers the task, the master kills it again, and the slave drains."""
    async with contextlib.AsyncExitStack() as stack:
        rig = Rig(mosquitto, tmp_path, stack)
        master = await rig.start_master()
        fw = await rig.framework(capabilities=[FrameworkCapability.TASK_KILLING_STATE])
        work = tmp_path / "slave"
        proc = await slave_process(mosquitto, work)
        stack.push_async_callback(reap, proc)
        offer = await fw.next_offer(timeout=30)
        sandbox = work / "sandboxes" / fw.framework_id / "t"
        task = TaskInfo(
            task_id="t",
            slave_id=offer.slave_id,
            resources=Resources(cpus=0.25, mem=64),
            command=CommandInfo(value=STUBBORN),
            kill_policy=KillPolicy(grace_period=30),
        )
        await fw.accept(offer, [task], refuse=0)
        await fw.update_for("t", TaskState.RUNNING, timeout=30)
        await eventually(lambda: (sandbox / "ready").exists())
        await drain(rig, DrainSlave(slave_id=offer.slave_id, max_grace_period=20))
        await fw.update_for("t", TaskState.KILLING, timeout=10)  # SIGTERM sent, ignored
        await eventually(lambda: "ignored" in (sandbox / "stdout").read_text())
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        assert (sandbox / "ready").exists()
        # the drain is now cut short by the operator: a second drain's cap is 0.5 s
        await drain(rig, DrainSlave(slave_id=offer.slave_id, max_grace_period=0.5))
        proc2 = await slave_process(mosquitto, work)
        stack.push_async_callback(reap, proc2)
        killed = await fw.update_for("t", TaskState.KILLED, timeout=30)
        assert killed.reason == Reason.SLAVE_DRAINING
        await eventually(lambda: drained(master, offer.slave_id), timeout=20)
        assert list(master.books.slaves) == [offer.slave_id]


async def test_a_slave_marked_gone_shuts_down_and_says_why(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    """As a Mesos agent the master sends ShutdownMessage: a slave process marked gone by an
    operator ends, status 1, saying so (it used to ask to register again every few
    seconds for ever, refused each time)."""
    async with contextlib.AsyncExitStack() as stack:
        rig = Rig(mosquitto, tmp_path, stack)
        master = await rig.start_master()
        fw = await rig.framework()
        proc = await slave_process(mosquitto, tmp_path / "slave", stderr=asyncio.subprocess.PIPE)
        stack.push_async_callback(reap, proc)
        offer = await fw.next_offer(timeout=30)
        await drain(rig, DrainSlave(slave_id=offer.slave_id, mark_gone=True))
        assert await within(proc.wait(), 60) == 1
        assert proc.stderr is not None
        said = (await proc.stderr.read()).decode()
        assert f"slave {offer.slave_id} was marked gone by an operator" in said
        assert "this slave shuts down" in said
        assert offer.slave_id in master.books.gone_slaves
