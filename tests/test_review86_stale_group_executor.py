"""review86: a task group's executor the master holds but its slave no longer plays.

The slave ends a group's executor with its last task and tells the master
(ExecutorExited), which frees the executor's resources and forgets it. That message is
posted after the task's end is journaled: a slave killed between the two (SIGKILL, an
OOM kill) restarts without the group (its tasks' records are gone with their ends) and
re-registers naming no such executor, but nothing on the master forgets one the slave
does not name. The master then holds the executor's resources for the framework's life,
and believes it runs: every later group naming that executor id on that slave is sent as
joining it (`GroupLaunch.starts` False), and the slave, which does not play it, drops
each (TASK_DROPPED, REASON_EXECUTOR_TERMINATED) -- for ever. (A custom executor heals:
a task naming one the slave does not run is answered with an ExecutorExited.)

Here the crash's effect is made by dropping the ExecutorExited; the slave's announce is
what its restart sends.

Fixed (master.calls.executors_back.ExecutorsBack.check_unnamed): at a slave's
(re-)registration with the master that knew it, each group executor the master books
there and the slave names nowhere is asked after (CheckExecutors), behind any launch in
flight on the slave's ordered topic; the slave answers for those it does not play
(ExecutorExited, `checked`), and they are freed. Mesos leaves this open (MESOS-1466).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from frameworks import Filters, Resources, Scheduler, SchedulerDriver, TaskState, build_task
from master.authz import Caller
from master.master import MasterConfig
from protocol.wire.messages import CheckExecutors, ExecutorExited

from harness.helpers import InProcess, Recorder, eventually, in_process_cluster

CLUSTER = "stale"
EXECUTOR = Resources(cpus=0.1, mem=32)
TASK = Resources(cpus=0.25, mem=32)
pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[InProcess]:
    config = MasterConfig(allocation_interval=0.1)
    async with in_process_cluster(CLUSTER, tmp_path, config, slaves=1) as c:
        yield c


@contextlib.asynccontextmanager
async def framework(cluster: InProcess, scheduler: Scheduler) -> AsyncIterator[SchedulerDriver]:
    driver = SchedulerDriver(scheduler, name="pods", broker=cluster.connect, cluster=CLUSTER)
    await driver.start()
    try:
        yield driver
    finally:
        driver.stop()
        await driver.join()


async def test_an_executor_the_slave_no_longer_plays_is_forgotten_when_it_re_registers(
    cluster: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    [slave] = cluster.slaves
    rec = Recorder()
    async with framework(cluster, rec) as driver:
        offer = await rec.offer_on(driver)
        fid = driver.framework_id or ""
        # the slave dies after the task's end is journaled, before ExecutorExited leaves
        monkeypatch.setattr(slave.default_executor, "_tell_exited", lambda *_: None)
        once = [build_task(offer, "once", TASK, command="true", task_id="once")]
        await driver.launch_group([offer.offer_id], "pod", once, EXECUTOR, Filters())
        await rec.update("once", TaskState.FINISHED)
        await eventually(lambda: not slave.groups.executors)
        monkeypatch.undo()
        fw = cluster.master.books.frameworks[fid]
        assert (slave.slave_id, "pod") in fw.executors  # (what the crash leaves)

        # back, it names no such executor
        churn = cluster.master.churn
        before = churn.registrations + churn.reregistrations
        await slave.registration.announce()
        await eventually(lambda: churn.registrations + churn.reregistrations > before)
        await eventually(lambda: not fw.executors)

        # and a later group naming the id runs, under an executor started for it
        driver.revive_offers()
        again = await rec.offer_on(driver, slave.slave_id)
        later = [build_task(again, "later", TASK, command="sleep 300", task_id="later")]
        await driver.launch_group([again.offer_id], "pod", later, EXECUTOR, Filters())
        await rec.update("later", TaskState.RUNNING)


async def test_an_answer_to_a_check_no_longer_asked_changes_nothing(cluster: InProcess) -> None:
    """A `checked` ExecutorExited counts only while the master waits for it: a late one
    (the executor ended meanwhile and was booked again by a new group), or one never
    asked for, frees nothing of a running executor."""
    [slave] = cluster.slaves
    rec = Recorder()
    async with framework(cluster, rec) as driver:
        offer = await rec.offer_on(driver)
        fid = driver.framework_id or ""
        runs = [build_task(offer, "runs", TASK, command="sleep 300", task_id="runs")]
        await driver.launch_group([offer.offer_id], "pod", runs, EXECUTOR, Filters())
        await rec.update("runs", TaskState.RUNNING)
        fw = cluster.master.books.frameworks[fid]
        key = (slave.slave_id, "pod")
        master_slave = cluster.master.books.slaves[slave.slave_id]
        late = ExecutorExited(
            framework_id=fid, slave_id=slave.slave_id, executor_id="pod", status=-1, checked=True
        )
        caller = Caller("slave", master_slave.principal, None)
        await cluster.master.slave_calls.on_executor_exited(late, caller)
        assert fw.executors[key] == EXECUTOR  # still booked: nobody asked
        # asked, and answered while asked: the slave plays it, so it says nothing
        await slave.default_executor.on_check(
            CheckExecutors(framework_id=fid, executor_ids=["pod"]), None
        )
        assert slave.groups.runs(fid, "pod")
        assert fw.executors[key] == EXECUTOR
