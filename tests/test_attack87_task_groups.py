"""attack87: task groups against their books, in process (as tests/test_task_groups.py).

A group launched on its executor just as that executor's last task ends: on an offer made
while the executor ran, sent the moment the task's end is heard. Whichever comes first at
the master, the group's launch or the executor's end, what the executor and the group
held is given back exactly once, and the slave and the master agree."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from frameworks import (
    Filters,
    Offer,
    Resources,
    TaskInfo,
    TaskState,
    build_task,
)
from master.master import MasterConfig
from protocol.wire.messages import DrainSlave

from harness.groups import EXECUTOR, KEEP_OUT, TASK
from harness.helpers import (
    InProcess,
    Recorder,
    books_balance,
    eventually,
    framework,
    held,
    in_process_cluster,
    open_transport,
)

CLUSTER = "groups87"
pytestmark = pytest.mark.timeout(90)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[InProcess]:
    config = MasterConfig(allocation_interval=0.1)
    async with in_process_cluster(CLUSTER, tmp_path, config, slaves=1) as c:
        yield c


@pytest.mark.parametrize("wait", [0.0, 0.05], ids=["at-once", "after-exited"])
async def test_a_group_sent_as_its_executors_last_task_ends_is_booked_once(
    cluster: InProcess, wait: float
) -> None:
    rec = Recorder()
    async with framework(cluster, rec) as driver:
        offer = await rec.offer_on(driver)
        sid, fid = offer.slave_id, driver.framework_id or ""
        slave = cluster.slaves[0]
        first = [build_task(offer, "short", TASK, command="sleep 0.5", task_id="short")]
        await driver.launch_group(
            [offer.offer_id], "pod", first, EXECUTOR, Filters(refuse_seconds=0)
        )
        await rec.update("short", TaskState.RUNNING)
        kept = await rec.offer_on(driver, sid)  # made while the executor runs
        assert kept.executor_ids == ["pod"]
        await rec.update("short", TaskState.FINISHED)
        if wait:
            await eventually(lambda: not cluster.master.books.frameworks[fid].executors)
        late = [build_task(kept, "late", TASK, command="sleep 300", task_id="late")]
        await driver.launch_group(
            [kept.offer_id], "pod", late, EXECUTOR, Filters(refuse_seconds=3600)
        )
        # (in process the executor's end reaches the master before the task's does the
        # framework: the group starts the executor again; the other order is below)
        await rec.update("late", TaskState.RUNNING)
        fw = cluster.master.books.frameworks[fid]
        assert fw.executors == {(sid, "pod"): EXECUTOR}  # booked once
        assert held(cluster, fid, sid) == TASK + EXECUTOR
        assert slave.used() == TASK + EXECUTOR
        books_balance(cluster.master)
        driver.kill_task("late")
        await rec.update("late", TaskState.KILLED)
        await eventually(lambda: not fw.executors)
        await eventually(lambda: held(cluster, fid, sid) == Resources())
        await eventually(lambda: slave.used() == Resources())
        books_balance(cluster.master)


async def test_a_group_reaching_its_slave_after_its_executor_ended_is_dropped_and_gives_all_back(
    cluster: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The master books the group on the running executor (it has not heard it ended);
    the slave, whose executor has ended, drops it. Neither the executor nor the group is
    left held, nor given back twice."""
    rec = Recorder()
    slave = cluster.slaves[0]
    told: list[tuple[str, str, int]] = []  # the slave's ExecutorExited, held back a while
    # (the default executor the slave plays tells it: held back there)
    monkeypatch.setattr(slave.default_executor, "_tell_exited", lambda *args: told.append(args))
    async with framework(cluster, rec) as driver:
        offer = await rec.offer_on(driver)
        sid, fid = offer.slave_id, driver.framework_id or ""
        first = [build_task(offer, "short", TASK, command="sleep 0.5", task_id="short")]
        await driver.launch_group(
            [offer.offer_id], "pod", first, EXECUTOR, Filters(refuse_seconds=0)
        )
        kept = await rec.offer_on(driver, sid)
        await rec.update("short", TaskState.FINISHED)
        await eventually(lambda: bool(told))
        fw = cluster.master.books.frameworks[fid]
        assert fw.executors == {(sid, "pod"): EXECUTOR}  # (the master has not heard)
        late = [build_task(kept, "late", TASK, command="sleep 300", task_id="late")]
        await driver.launch_group(
            [kept.offer_id], "pod", late, EXECUTOR, Filters(refuse_seconds=3600)
        )
        dropped = await rec.update("late", TaskState.LOST)  # (DROPPED, not partition-aware)
        assert "ended before the group came" in (dropped.message or "")
        monkeypatch.undo()
        for args in told:
            slave.custom.tell_exited(*args)
        await eventually(lambda: not fw.executors)
        await eventually(lambda: held(cluster, fid, sid) == Resources())
        assert slave.used() == Resources()
        books_balance(cluster.master)


def pod(offer: Offer) -> list[TaskInfo]:
    return [
        build_task(offer, "web", TASK, command="sleep 300", task_id="web"),
        build_task(offer, "log", TASK, command="sleep 300", task_id="log"),
    ]


async def test_a_torn_down_frameworks_groups_and_their_executor_give_all_back(
    cluster: InProcess,
) -> None:
    rec = Recorder()
    slave = cluster.slaves[0]
    async with framework(cluster, rec) as driver:
        offer = await rec.offer_on(driver)
        sid, fid = offer.slave_id, driver.framework_id or ""
        await driver.launch_group([offer.offer_id], "pod", pod(offer), EXECUTOR, KEEP_OUT)
        await rec.update("web", TaskState.RUNNING)
        await rec.update("log", TaskState.RUNNING)
    # (stopped: torn down) its tasks killed, its executor gone, nothing of it held anywhere
    await eventually(lambda: fid not in cluster.master.books.frameworks)
    await eventually(lambda: not slave.tasks)
    await eventually(lambda: not cluster.master.books.dying.on(sid))
    assert not slave.groups.executors
    assert slave.used() == Resources()
    assert cluster.master.allocator.held(fid, sid) == Resources()
    books_balance(cluster.master)


async def test_a_drained_slaves_groups_end_and_their_executor_gives_all_back(
    cluster: InProcess,
) -> None:
    rec = Recorder()
    slave = cluster.slaves[0]
    async with contextlib.AsyncExitStack() as stack:
        ops = await open_transport(stack, cluster.connect, "ops")
        driver = await stack.enter_async_context(framework(cluster, rec))
        offer = await rec.offer_on(driver)
        sid, fid = offer.slave_id, driver.framework_id or ""
        await driver.launch_group([offer.offer_id], "pod", pod(offer), EXECUTOR, KEEP_OUT)
        await rec.update("web", TaskState.RUNNING)
        await rec.update("log", TaskState.RUNNING)
        drain = DrainSlave(slave_id=sid, max_grace_period=1.0)
        await ops.publish(cluster.topics.inbound("operator", "ops"), drain)
        for task_id in ("web", "log"):
            await rec.update(task_id, TaskState.KILLED)
        fw = cluster.master.books.frameworks[fid]
        await eventually(lambda: not fw.executors)
        await eventually(lambda: cluster.master.allocator.held(fid, sid) == Resources())
        assert not slave.groups.executors
        assert slave.used() == Resources()
        books_balance(cluster.master)
