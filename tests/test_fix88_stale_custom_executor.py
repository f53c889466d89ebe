"""fix88: a custom executor whose exit a slave's crash lost stays booked.

A custom executor's exit is told to the master (ExecutorExited) after the slave saw it: a
slave that dies between the two restarts without the executor and re-registers naming
none, and the master kept the executor's resources booked -- an idle one's for ever (a
task naming it is answered ExecutorExited, which heals it; nothing asked otherwise).
review86 closed the same window for task groups' executors.

Here the crash's effect is made by dropping the ExecutorExited; the slave's announce is
what its restart sends.

Fixed (master.calls.executors_back.ExecutorsBack.check_unnamed): at a slave's
(re-)registration with the master that knew it, every executor the master books there
and the slave names nowhere, custom ones as well as groups', is asked after
(CheckExecutors), behind any launch in flight on the slave's ordered topic; the slave
answers for those it does not run (ExecutorExited, `checked`), and they are freed. An
answer counts only while asked: not after the executor ended, nor after a launch on it
that went behind the ask (master.calls.accepts), which runs it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from frameworks import Filters, Resources, SchedulerDriver, TaskState, build_task
from frameworks.scheduler import Driver
from master.authz import Caller
from master.master import MasterConfig
from protocol.wire.messages import (
    CheckExecutors,
    CommandInfo,
    ExecutorExited,
    ExecutorInfo,
    RunTasks,
)
from slave.default_executor import DefaultExecutor
from slave.slave import Slave

from harness.helpers import InProcess, Recorder, books_balance, eventually, in_process_cluster

CLUSTER = "stalecustom"
EXECUTOR = Resources(cpus=0.1, mem=32)
TASK = Resources(cpus=0.25, mem=32)
pytestmark = pytest.mark.timeout(60)

# A task named once-* ends FINISHED and its executor with it; any other runs on.
PROGRAM = """
import asyncio
from frameworks.executor import Executor, ExecutorDriver
from protocol.wire.messages import TaskStatus, TaskState
class OnceOrOn(Executor):
    async def launch_task(self, driver, task):
        driver.spawn(self.work(driver, task.task_id))
    async def work(self, driver, task_id):
        await driver.send_status_update(TaskStatus(task_id=task_id, state=TaskState.RUNNING))
        if task_id.startswith("once"):
            await driver.send_status_update(
                TaskStatus(task_id=task_id, state=TaskState.FINISHED))
            driver.stop()
asyncio.run(ExecutorDriver(OnceOrOn()).run())
"""


class Lost(Recorder):
    """A Recorder that keeps the executors it hears are lost, too."""

    def __init__(self) -> None:
        super().__init__()
        self.lost: list[tuple[str, str, int]] = []

    async def executor_lost(
        self, driver: Driver, executor_id: str, slave_id: str, status: int
    ) -> None:
        self.lost.append((executor_id, slave_id, status))
        self.changed.set()


def own_executor(tmp_path: Path) -> ExecutorInfo:
    program = tmp_path / "once_or_on.py"
    program.write_text(PROGRAM)
    command = CommandInfo(value=f"{sys.executable} {program}")
    return ExecutorInfo(executor_id="own", command=command, resources=EXECUTOR)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[InProcess]:
    config = MasterConfig(allocation_interval=0.1)
    async with in_process_cluster(CLUSTER, tmp_path, config, slaves=1) as c:
        yield c


@contextlib.asynccontextmanager
async def framework(cluster: InProcess, scheduler: Recorder) -> AsyncIterator[SchedulerDriver]:
    driver = SchedulerDriver(scheduler, name="own", broker=cluster.connect, cluster=CLUSTER)
    await driver.start()
    try:
        yield driver
    finally:
        driver.stop()
        await driver.join()


async def exit_lost(
    slave: Slave, rec: Recorder, driver: SchedulerDriver, own: ExecutorInfo, mp: Any
) -> None:
    """`own` runs a task and exits with it, and its ExecutorExited is lost (the crash)."""
    offer = await rec.offer_on(driver, slave.slave_id)
    once = build_task(offer, "once", TASK, executor=own, task_id="once")
    mp.setattr(slave.custom, "tell_exited", lambda *_, **__: None)
    await driver.launch_tasks([offer.offer_id], [once], Filters())
    await rec.update("once", TaskState.FINISHED)
    await eventually(lambda: not slave.executors)
    mp.undo()


async def reannounce(cluster: InProcess, slave: Slave) -> None:
    """The slave's restart: it announces itself again, and the master takes it."""
    churn = cluster.master.churn
    before = churn.registrations + churn.reregistrations
    await slave.registration.announce()
    await eventually(lambda: churn.registrations + churn.reregistrations > before)


async def test_an_idle_custom_executor_the_slave_no_longer_runs_is_freed_when_it_is_back(
    cluster: InProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    [slave] = cluster.slaves
    own = own_executor(tmp_path)
    rec = Lost()
    async with framework(cluster, rec) as driver:
        await exit_lost(slave, rec, driver, own, monkeypatch)
        fw = cluster.master.books.frameworks[driver.framework_id or ""]
        key = (slave.slave_id, "own")
        assert fw.executors == {key: EXECUTOR}  # (what the crash leaves: booked, idle)

        await reannounce(cluster, slave)
        await rec.wait(lambda: bool(rec.lost))
        assert rec.lost == [("own", slave.slave_id, -1)]  # (its framework hears it)
        assert not fw.executors
        assert not fw.executor_checks
        books_balance(cluster.master)

        # and a later task naming it runs, under an executor started for it
        driver.revive_offers()
        again = await rec.offer_on(driver, slave.slave_id)
        later = build_task(again, "later", TASK, executor=own, task_id="later")
        await driver.launch_tasks([again.offer_id], [later], Filters())
        await rec.update("later", TaskState.RUNNING)
        assert fw.executors == {key: EXECUTOR}
        books_balance(cluster.master)


async def test_a_late_answer_after_a_launch_on_the_executor_frees_nothing(
    cluster: InProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The slave answers the ask (it runs no `own`), and before the master reads that,
    the framework launches a task on `own`, still booked: sent behind the ask, it starts
    the executor again, so the answer, read after, is of an executor gone since and must
    not free the one that runs."""
    [slave] = cluster.slaves
    own = own_executor(tmp_path)
    rec = Lost()
    async with framework(cluster, rec) as driver:
        await exit_lost(slave, rec, driver, own, monkeypatch)
        fid = driver.framework_id or ""
        fw = cluster.master.books.frameworks[fid]
        key = (slave.slave_id, "own")
        answers: list[tuple[Any, ...]] = []  # (held: the master reads them late)
        monkeypatch.setattr(
            slave.default_executor, "_tell_exited", lambda *a, **_: answers.append(a)
        )
        await reannounce(cluster, slave)
        await eventually(lambda: bool(answers))
        monkeypatch.undo()
        assert key in fw.executor_checks

        driver.revive_offers()
        again = await rec.offer_on(driver, slave.slave_id)
        later = build_task(again, "later", TASK, executor=own, task_id="later")
        await driver.launch_tasks([again.offer_id], [later], Filters())
        await rec.update("later", TaskState.RUNNING)
        assert (fid, "own") in slave.executors

        [(_, eid, status)] = answers
        late = ExecutorExited(
            framework_id=fid, slave_id=slave.slave_id, executor_id=eid, status=status, checked=True
        )
        caller = Caller("slave", cluster.master.books.slaves[slave.slave_id].principal, None)
        await cluster.master.slave_calls.on_executor_exited(late, caller)
        assert fw.executors == {key: EXECUTOR}  # still booked: it runs
        assert not rec.lost
        books_balance(cluster.master)


async def test_an_executor_launched_before_the_slave_is_back_is_asked_after_its_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A launch that starts a custom executor, in flight as the slave re-registers (so it
    names neither the task nor the executor): the ask goes behind it on the slave's
    topic, the slave reads it with the executor running, and says nothing."""
    through, held = asyncio.Event(), asyncio.Event()
    checked = asyncio.Event()
    run_tasks = Slave._on_run_tasks
    on_check = DefaultExecutor.on_check

    async def gated(self: Slave, msg: RunTasks, reply_to: str | None) -> None:
        held.set()
        await through.wait()
        await run_tasks(self, msg, reply_to)

    async def seen(self: DefaultExecutor, msg: CheckExecutors, reply_to: str | None) -> None:
        await on_check(self, msg, reply_to)
        checked.set()

    monkeypatch.setattr(Slave, "_on_run_tasks", gated)
    monkeypatch.setattr(DefaultExecutor, "on_check", seen)
    own = own_executor(tmp_path)
    config = MasterConfig(allocation_interval=0.1)
    async with in_process_cluster(CLUSTER, tmp_path, config, slaves=1) as cluster:
        [slave] = cluster.slaves
        rec = Lost()
        async with framework(cluster, rec) as driver:
            offer = await rec.offer_on(driver, slave.slave_id)
            task = build_task(offer, "on", TASK, executor=own, task_id="on")
            await driver.launch_tasks([offer.offer_id], [task], Filters())
            await held.wait()  # the launch is on its way: the slave has not read it
            fw = cluster.master.books.frameworks[driver.framework_id or ""]
            key = (slave.slave_id, "own")
            assert not slave.executors
            assert fw.executors == {key: EXECUTOR}
            slave.bus.incarnation = "restarted"  # (a restart's new connection: else the
            # master takes an announce missing a task it launched for a redelivered one)
            await reannounce(cluster, slave)
            assert key in fw.executor_checks  # asked, behind the launch
            through.set()
            await rec.update("on", TaskState.RUNNING)
            await checked.wait()
            assert fw.executors == {key: EXECUTOR}  # not answered: it runs
            assert not rec.lost
            books_balance(cluster.master)
