"""Task groups (Mesos's LAUNCH_GROUP with the default executor) through the SDK, against a
master and slaves in process on the memory transport; the tasks are real processes.

What a framework relies on: a group runs all or none (one invalid task: every task of it
TASK_ERROR, REASON_TASK_GROUP_INVALID, and none runs); a task that fails has the rest of
its group killed (TASK_KILLED), one that finishes does not; the executor's resources are
taken once, with the first group, and given back with its last task, exactly; and another
tenant can neither launch a group as this framework, nor on its offers, nor reach its
executor by naming the same executor id.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from frameworks import (
    CommandInfo,
    DriverError,
    ExecutorInfo,
    Filters,
    Reason,
    Resources,
    TaskState,
    build_task,
)
from master.intake.costs import call_cost
from master.master import MasterConfig
from protocol.wire.messages import Accept, Error, TaskGroup
from slave.paths import task_sandbox
from slave.slave import Slave

from harness.groups import EXECUTOR, KEEP_OUT, TASK
from harness.helpers import (
    Inbox,
    InProcess,
    Recorder,
    books_balance,
    eventually,
    framework,
    held,
    in_process_cluster,
    open_transport,
)

CLUSTER = "groups"
pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[InProcess]:
    config = MasterConfig(allocation_interval=0.1)
    async with in_process_cluster(CLUSTER, tmp_path, config, slaves=2) as c:
        yield c


def slave_of(c: InProcess, slave_id: str) -> Slave:
    return next(s for s in c.slaves if s.slave_id == slave_id)


def test_an_accepts_groups_count_in_its_task_bound_before_any_task_is_read() -> None:
    """1,000 tasks in all, grouped or not, as an Accept's own; the 1,001st is refused
    before any is validated (here: none of them is a valid task)."""
    unread = {"not": "a task"}
    groups = [{"executor_id": "e", "tasks": [unread] * 500} for _ in range(2)]
    body = {"framework_id": "f", "offer_ids": ["o"], "tasks": [unread], "groups": groups}
    with pytest.raises(ValidationError, match="at most 1000 tasks, grouped or not, in one"):
        Accept.model_validate(body)


def test_an_accepts_groups_cost_their_tasks_against_its_rate_limit() -> None:
    """Launching in groups costs what launching the same tasks alone does: not free."""
    task = {"task_id": "t", "slave_id": "s", "resources": {"cpus": 1}, "command": {"value": "x"}}
    alone = Accept.model_validate({"framework_id": "f", "offer_ids": ["o"], "tasks": [task] * 300})
    groups = [{"executor_id": "e", "tasks": [task] * 100} for _ in range(3)]
    grouped = Accept.model_validate({"framework_id": "f", "offer_ids": ["o"], "groups": groups})
    assert call_cost(grouped) == call_cost(alone) is not None


async def test_a_failing_task_kills_its_siblings_and_its_executor_ends_with_them(
    cluster: InProcess,
) -> None:
    rec = Recorder()
    async with framework(cluster, rec, "pods") as driver:
        offer = await rec.offer_on(driver)
        sid, fid = offer.slave_id, driver.framework_id or ""
        tasks = [
            build_task(offer, "fail", TASK, command="exit 3", task_id="fail"),
            build_task(offer, "web", TASK, command="sleep 300", task_id="web"),
            build_task(offer, "log", TASK, command="sleep 300", task_id="log"),
        ]
        await driver.launch_group([offer.offer_id], "pod", tasks, EXECUTOR, KEEP_OUT)
        failed = await rec.update("fail", TaskState.FAILED)
        assert failed.exit_code == 3
        for task_id in ("web", "log"):  # killed by the default executor's policy
            killed = await rec.update(task_id, TaskState.KILLED)
            assert killed.message == "killed: task fail of its group ended TASK_FAILED"
        # each task's updates are its own, and name the group's executor
        assert {s.executor_id for s in rec.statuses} == {"pod"}
        assert {s.task_id for s in rec.statuses} == {"fail", "web", "log"}
        # the executor ended with its last task: what it held is back, exactly
        fw = cluster.master.books.frameworks[fid]
        await eventually(lambda: not fw.executors)
        await eventually(lambda: held(cluster, fid, sid) == Resources())
        assert slave_of(cluster, sid).used() == Resources()
        books_balance(cluster.master)


async def test_a_task_its_framework_kills_takes_its_group_down(cluster: InProcess) -> None:
    """As Mesos's default executor: a task KILLED, whoever killed it, kills its siblings."""
    rec = Recorder()
    async with framework(cluster, rec, "pods") as driver:
        offer = await rec.offer_on(driver)
        tasks = [
            build_task(offer, "main", TASK, command="sleep 300", task_id="main"),
            build_task(offer, "side", TASK, command="sleep 300", task_id="side"),
        ]
        await driver.launch_group([offer.offer_id], "pod", tasks, EXECUTOR, KEEP_OUT)
        await rec.update("side", TaskState.RUNNING)
        await rec.update("main", TaskState.RUNNING)
        driver.kill_task("main")
        await rec.update("main", TaskState.KILLED)
        side = await rec.update("side", TaskState.KILLED)
        assert side.message == "killed: task main of its group ended TASK_KILLED"
        fw = cluster.master.books.frameworks[driver.framework_id or ""]
        await eventually(lambda: not fw.executors)
        books_balance(cluster.master)


async def test_a_finishing_task_leaves_its_siblings_and_a_later_group_joins_its_executor(
    cluster: InProcess,
) -> None:
    rec = Recorder()
    async with framework(cluster, rec, "pods") as driver:
        offer = await rec.offer_on(driver)
        sid, fid = offer.slave_id, driver.framework_id or ""
        slave, fw = slave_of(cluster, sid), cluster.master.books.frameworks[fid]
        first = [
            build_task(offer, "init", TASK, command="true", task_id="init"),
            build_task(offer, "stay", TASK, command="sleep 300", task_id="stay"),
        ]
        await driver.launch_group([offer.offer_id], "pod", first, EXECUTOR, KEEP_OUT)
        await rec.update("init", TaskState.FINISHED)
        await rec.update("stay", TaskState.RUNNING)
        # the end was handled before its update left: its sibling runs on, no kill begun
        stay = slave.tasks[(fid, "stay")]
        assert stay.state == TaskState.RUNNING
        assert stay.kill is None
        # booked: the running task's and the executor's resources, once
        assert fw.executors == {(sid, "pod"): EXECUTOR}
        assert held(cluster, fid, sid) == TASK + EXECUTOR
        assert slave.used() == TASK + EXECUTOR

        # a later group on the same executor takes only its tasks' resources
        driver.revive_offers()
        again = await rec.offer_on(driver, sid)
        assert again.executor_ids == ["pod"]
        second = [build_task(again, "solo", TASK, command="sleep 300", task_id="solo")]
        await driver.launch_group([again.offer_id], "pod", second, EXECUTOR, KEEP_OUT)
        await rec.update("solo", TaskState.RUNNING)
        assert fw.executors == {(sid, "pod"): EXECUTOR}
        assert held(cluster, fid, sid) == TASK + TASK + EXECUTOR
        # a task of its own naming the group's executor is refused: it runs groups only
        driver.revive_offers()
        third = await rec.offer_on(driver, sid)
        custom = ExecutorInfo(executor_id="pod", command=CommandInfo(value="true"))
        odd = build_task(third, "odd", TASK, executor=custom, task_id="odd")
        await driver.launch_tasks([third.offer_id], [odd], KEEP_OUT)
        refused = await rec.update("odd", TaskState.ERROR)
        assert "executor pod runs task groups" in refused.message
        assert held(cluster, fid, sid) == TASK + TASK + EXECUTOR

        # a task killed kills the rest of its own group, not another group's
        driver.kill_task("stay")
        await rec.update("stay", TaskState.KILLED)
        solo = slave.tasks[(fid, "solo")]
        assert solo.state == TaskState.RUNNING
        assert solo.kill is None
        assert fw.executors == {(sid, "pod"): EXECUTOR}  # (solo still runs under it)
        driver.kill_task("solo")
        await rec.update("solo", TaskState.KILLED)
        await eventually(lambda: not fw.executors)
        await eventually(lambda: held(cluster, fid, sid) == Resources())
        assert slave.used() == Resources()
        books_balance(cluster.master)


async def test_an_ended_tasks_sandbox_stays_while_its_groups_executor_runs(
    cluster: InProcess,
) -> None:
    """As in Mesos, where a task's sandbox lies in its executor's run: the sandbox of a
    group's task that finished stays while its sibling runs on under the group's
    executor, even with every ended sandbox due at once (a delay of 0), and goes once
    the executor has ended with its last task."""
    rec = Recorder()
    async with framework(cluster, rec, "pods") as driver:
        offer = await rec.offer_on(driver)
        sid, fid = offer.slave_id, driver.framework_id or ""
        slave = slave_of(cluster, sid)
        tasks = [
            build_task(offer, "init", TASK, command="true", task_id="init"),
            build_task(offer, "stay", TASK, command="sleep 300", task_id="stay"),
        ]
        await driver.launch_group([offer.offer_id], "pod", tasks, EXECUTOR, KEEP_OUT)
        await rec.update("init", TaskState.FINISHED)
        await rec.update("stay", TaskState.RUNNING)
        await eventually(lambda: (fid, "init") not in slave.tasks)  # (forgotten: ended)
        init = task_sandbox(slave.config.work_dir, fid, "init")
        stay = task_sandbox(slave.config.work_dir, fid, "stay")
        assert init.is_dir()
        slave.sandbox_gc.delay = 0.0  # (every ended sandbox due at once)
        await slave.sandbox_gc.once()
        await slave.sandbox_gc.once()
        assert init.is_dir()
        assert stay.is_dir()
        driver.kill_task("stay")
        await rec.update("stay", TaskState.KILLED)
        await eventually(lambda: not slave.groups.executors)
        await eventually(lambda: (fid, "stay") not in slave.tasks)
        await slave.sandbox_gc.once()
        assert not init.exists()
        assert not stay.exists()


async def test_one_invalid_task_keeps_its_whole_group_from_running(
    cluster: InProcess,
) -> None:
    rec = Recorder()
    async with framework(cluster, rec, "pods") as driver:
        offer = await rec.offer_on(driver)
        sid, fid = offer.slave_id, driver.framework_id or ""
        live = build_task(offer, "taken", TASK, command="sleep 300", task_id="taken")
        await driver.launch_tasks([offer.offer_id], [live], Filters(refuse_seconds=0))
        await rec.update("taken", TaskState.RUNNING)

        # the SDK refuses what it can see is wrong, before anything is sent
        fresh = await rec.offer_on(driver, sid)
        huge = build_task(fresh, "huge", Resources(cpus=64), command="true", task_id="huge")
        with pytest.raises(DriverError, match="needs cpus:64"):
            driver.launch_group([fresh.offer_id], "pod", [huge], EXECUTOR)
        own = ExecutorInfo(executor_id="mine", command=CommandInfo(value="true"))
        stray = build_task(fresh, "stray", TASK, executor=own, task_id="stray")
        with pytest.raises(DriverError, match="not an executor of its own"):
            driver.launch_group([fresh.offer_id], "pod", [stray], EXECUTOR)

        # the master refuses a task id in use: every task of the group TASK_ERROR, none runs
        group = [
            build_task(fresh, "new", TASK, command="sleep 300", task_id="new"),
            build_task(fresh, "again", TASK, command="true", task_id="taken"),
        ]
        await driver.launch_group([fresh.offer_id], "pod", group, EXECUTOR, KEEP_OUT)
        refused = await rec.update("new", TaskState.ERROR)
        assert refused.reason == Reason.TASK_GROUP_INVALID
        assert "task taken: the task id is already in use" in refused.message
        again = next(s for s in rec.of("taken") if s.state == TaskState.ERROR)
        assert (again.reason, again.message) == (refused.reason, refused.message)
        assert rec.states("new") == [TaskState.ERROR]
        slave = slave_of(cluster, sid)
        assert (fid, "new") not in slave.tasks
        assert slave.tasks[(fid, "taken")].state == TaskState.RUNNING  # the live one runs on
        # nothing of the group was booked: the running task alone is held
        fw = cluster.master.books.frameworks[fid]
        assert not fw.executors
        assert "new" not in fw.tasks
        await eventually(lambda: held(cluster, fid, sid) == TASK)
        assert slave.used() == TASK
        books_balance(cluster.master)


async def test_a_group_its_slave_cannot_run_runs_none_of_its_tasks(cluster: InProcess) -> None:
    """The slave checks the group whole too: one task it cannot run (an image task whose
    environment podman could not be given) and none runs; the executor it would have
    started gives its resources back."""
    rec = Recorder()
    async with framework(cluster, rec, "pods") as driver:
        offer = await rec.offer_on(driver)
        sid, fid = offer.slave_id, driver.framework_id or ""
        image = build_task(offer, "img", TASK, command="true", image="localhost/none:1")
        bad = CommandInfo(value="true", environment={"BAD": "two\nlines"})
        tasks = [
            build_task(offer, "fine", TASK, command="sleep 300", task_id="fine"),
            image.model_copy(update={"task_id": "img", "command": bad}),
        ]
        await driver.launch_group([offer.offer_id], "pod", tasks, EXECUTOR, KEEP_OUT)
        for task_id in ("fine", "img"):
            refused = await rec.update(task_id, TaskState.ERROR)
            assert refused.reason == Reason.TASK_GROUP_INVALID
            assert "environment may not hold a newline" in refused.message
        assert rec.states("fine") == [TaskState.ERROR]
        assert (fid, "fine") not in slave_of(cluster, sid).tasks
        fw = cluster.master.books.frameworks[fid]
        await eventually(lambda: not fw.executors)
        await eventually(lambda: held(cluster, fid, sid) == Resources())
        books_balance(cluster.master)


async def test_a_hostile_tenant_reaches_neither_another_framework_nor_its_offers_nor_its_executor(
    cluster: InProcess,
) -> None:
    alice, mallory = Recorder(), Recorder()
    async with contextlib.AsyncExitStack() as stack:
        a = await stack.enter_async_context(framework(cluster, alice, "alice"))
        first = await alice.offer_on(a, "slave-0")
        kept = await alice.offer_on(a, "slave-1")  # outstanding: alice's, unanswered
        afid = a.framework_id or ""
        pod = [build_task(first, "a1", TASK, command="sleep 300", task_id="a1")]
        await a.launch_group([first.offer_id], "pod", pod, EXECUTOR, KEEP_OUT)
        await alice.update("a1", TaskState.RUNNING)
        m = await stack.enter_async_context(framework(cluster, mallory, "mallory"))
        mine = await mallory.offer_on(m, "slave-0")
        mfid = m.framework_id or ""

        # 1. a group sent as alice's framework, from mallory's connection: refused whole
        inbox = cluster.topics.outbox("framework", "mallory") + "/raw"
        raw = await open_transport(stack, cluster.connect, "mallory-raw", inbox=inbox)
        answers = Inbox()
        await raw.subscribe(inbox, answers)
        forged = build_task(mine, "m0", TASK, command="exit 1", task_id="m0")
        group = TaskGroup(executor_id="pod", executor_resources=EXECUTOR, tasks=[forged])
        call = Accept(framework_id=afid, offer_ids=[kept.offer_id], groups=[group])
        await raw.publish(cluster.topics.inbound("framework", "mallory"), call)
        error = await answers.wait_for(Error)
        assert error.code == "unknown-framework"

        # 2. a group of mallory's on alice's offer (a doctored SDK sends it): dropped
        m.offers[kept.offer_id] = kept
        stolen = [build_task(kept, "m1", TASK, command="exit 1", task_id="m1")]
        await m.launch_group([kept.offer_id], "pod", stolen, EXECUTOR)
        dropped = await mallory.update("m1", TaskState.LOST)  # (not partition-aware)
        assert dropped.reason == Reason.INVALID_OFFERS
        assert cluster.master.books.offers[kept.offer_id].framework_id == afid

        # 3. mallory's own group naming alice's executor id: an executor of her own, whose
        # failing task kills her group only
        ours = [
            build_task(mine, "m2", TASK, command="exit 1", task_id="m2"),
            build_task(mine, "m3", TASK, command="sleep 300", task_id="m3"),
        ]
        await m.launch_group([mine.offer_id], "pod", ours, EXECUTOR, KEEP_OUT)
        await mallory.update("m2", TaskState.FAILED)
        await mallory.update("m3", TaskState.KILLED)
        slave = slave_of(cluster, "slave-0")
        a1 = slave.tasks[(afid, "a1")]
        assert a1.state == TaskState.RUNNING
        assert a1.kill is None
        assert alice.states("a1") == [TaskState.STARTING, TaskState.RUNNING]
        assert {s.task_id for s in alice.statuses} == {"a1"}  # (none of mallory's)
        for task_id in ("m0", "m1"):  # neither ever reached a slave
            assert all((k[1] != task_id) for s in cluster.slaves for k in s.tasks)
        books = cluster.master.books.frameworks
        assert books[afid].executors == {("slave-0", "pod"): EXECUTOR}
        await eventually(lambda: not books[mfid].executors)
        await eventually(lambda: held(cluster, mfid, "slave-0") == Resources())
        assert held(cluster, afid, "slave-0") == TASK + EXECUTOR
        books_balance(cluster.master)
