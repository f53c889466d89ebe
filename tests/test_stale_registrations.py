"""A slave's (re-)registration read after a launch to it may have been sent before the
launch arrived there: read behind the master's backlog (a registration storm, a new
leader's), or a retry sent before the launch and read after it. What it does not name
of a task the slave has said nothing of yet is no word on that task: the master asks the
slave (as Mesos's master asks an agent, ReconcileTasksMessage), and keeps the task's
resources booked until the slave answers. Dropped after a grace of 10 s instead, a task
the slave ran was freed for another launch, which the slave refused as not fitting
(`benchmarks.slaves`, 100,000 slaves at load 23: 397 launches refused). The master and
a fake slave on the in-memory transport, then the slave's own answer."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from protocol.wire.messages import (
    CommandInfo,
    EndingTask,
    Reason,
    Reconcile,
    ReconcileTask,
    Register,
    Reregister,
    Rescind,
    RunningTask,
    RunTasks,
    Source,
    StatusUpdate,
    TaskInfo,
    TaskState,
    Update,
)
from protocol.wire.resources import Resources
from slave.slave import Slave, SlaveConfig

from harness.helpers import Inbox, books_balance, eventually
from harness.master import GB, Cluster, T
from harness.master import cluster as cluster

HALF = Resources(cpus=1, mem=GB)


async def test_a_registration_read_after_a_launch_frees_nothing_until_the_slave_says(
    cluster: Cluster,
) -> None:
    """The tasks it does not name are asked after and stay booked (not said lost, not
    offered again); the slave runs one (its update says so) and answers TASK_DROPPED for
    one it never got (TASK_LOST to a framework not partition-aware), which frees that."""
    a = await cluster.framework("A")
    s1 = await cluster.slave("s1", Resources(cpus=2, mem=2 * GB))
    offer = await a.next_offer()
    await a.accept(offer, [a.task(offer, HALF, "ran"), a.task(offer, HALF, "lost")], refuse=0)
    await s1.inbox.wait_count(RunTasks, 1)
    for task in cluster.master.books.frameworks[a.framework_id].tasks.values():
        task.launched_at -= 60  # (read a minute behind: past any grace)
    offers = a.offer_count()
    await s1.bus.publish(  # what it sent before the launch reached it, read only now
        s1.to_master, Register(slave_id="s1", hostname="s1.local", resources=s1.resources)
    )
    await cluster.rounds_pass()
    assert not a.inbox.of(Update)  # nothing said lost of what the slave may run
    assert a.offer_count() == offers  # nor its resources offered again
    ask = await s1.inbox.wait_for(Reconcile)  # the slave is asked instead
    assert ask.framework_id == a.framework_id
    assert {t.task_id for t in ask.tasks} == {"ran", "lost"}
    books_balance(cluster.master)

    await s1.report(a.framework_id, "ran", TaskState.RUNNING)  # it had that one
    await s1.report(a.framework_id, "lost", TaskState.DROPPED)  # and never got this one
    await a.update_for("ran", TaskState.RUNNING)
    await a.update_for("lost", TaskState.LOST)
    again = await a.next_offer(after=offers)  # what the one it never got held, only
    assert again.resources == HALF
    assert set(cluster.master.books.frameworks[a.framework_id].tasks) == {"ran"}
    books_balance(cluster.master)


@contextlib.asynccontextmanager
async def real_slave(cluster: Cluster, work: Path) -> AsyncIterator[Slave]:
    bus = await cluster.stack.enter_async_context(
        cluster.connect(name="s1", inbox=T.slave("slave", "s1"), will=None)
    )
    config = SlaveConfig(
        slave_id="s1",
        hostname="h1",
        resources=Resources(cpus=2, mem=2 * GB),
        work_dir=work,
        simulated_tasks=True,
        cluster=T.cluster,
    )
    slave = Slave(bus, T, config)
    await slave.start()
    try:
        yield slave
    finally:
        await slave.stop()


async def test_a_slave_asked_after_a_task_it_never_got_answers_dropped(
    cluster: Cluster, tmp_path: Path
) -> None:
    """As a Mesos agent answers ReconcileTasksMessage: TASK_DROPPED, from the slave, for
    a task it never got (the master then tells the framework TASK_LOST if it is not
    partition-aware: the test above); nothing for one it runs, which runs on."""
    a = await cluster.framework("A")
    async with real_slave(cluster, tmp_path) as slave:
        said = Inbox()  # what the slave tells the master
        spy = await cluster.stack.enter_async_context(
            cluster.connect(name="spy", inbox=None, will=None)
        )
        await spy.subscribe(slave.to_master, said)
        offer = await a.next_offer()
        task = a.task(offer, HALF, "ran")
        await a.accept(offer, [task.model_copy(update={"command": CommandInfo(value="sleep 600")})])
        await a.update_for("ran", TaskState.RUNNING)
        asked = [ReconcileTask(task_id=t, slave_id="s1") for t in ("ran", "never")]
        await cluster.master.bus.publish(  # (as the master asks it)
            T.slave("slave", "s1"), Reconcile(framework_id=a.framework_id, tasks=asked)
        )
        answer = await said.wait_for(StatusUpdate, lambda u: u.status.task_id == "never")
        never = answer.status
        assert (never.state, never.reason, never.source) == (
            TaskState.DROPPED,
            Reason.RECONCILIATION,
            Source.SLAVE,
        )
        assert {u.status.task_id for u in said.of(StatusUpdate)} == {"ran", "never"}
        assert (a.framework_id, "ran") in slave.tasks  # (and runs on)


async def test_a_slave_back_with_a_task_the_master_did_not_know_has_its_offers_taken_back(
    cluster: Cluster,
) -> None:
    """A registered slave's re-registration may name a task this master never launched
    (one a deposed leader launched there before the slave saw the new epoch, its first
    registration with this master sent before the launch arrived): that task's
    resources are taken back from the offers of it made meanwhile, as for a slave on a
    new connection, and offered again as what is left, not held twice."""
    a = await cluster.framework("A")
    s1 = await cluster.slave("s1", Resources(cpus=2, mem=2 * GB))
    offer = await a.next_offer()
    assert offer.resources == Resources(cpus=2, mem=2 * GB)
    earlier = TaskInfo(
        task_id="earlier",
        name="earlier",
        slave_id="s1",
        resources=HALF,
        command=CommandInfo(value="sleep 600"),
    )
    await s1.bus.publish(
        s1.to_master,
        Reregister(
            slave_id="s1",
            hostname="s1.local",
            resources=s1.resources,
            incarnation=s1.bus.incarnation,  # (the same connection)
            tasks=[RunningTask(framework_id=a.framework_id, task=earlier, state=TaskState.RUNNING)],
        ),
    )
    rescinded = await a.inbox.wait_for(Rescind)
    assert rescinded.offer_id == offer.offer_id
    again = await a.next_offer(after=1)
    assert again.resources == HALF  # what the task does not hold
    books_balance(cluster.master)


async def test_what_a_slave_says_ended_is_what_it_says_last(cluster: Cluster) -> None:
    """A re-registration names the tasks that ended there, their last update on its way:
    each names them all, in place of the last one's (a slave re-registering over and
    over, 10,000 other tasks each time, grew the master's books without end)."""
    s1 = await cluster.slave("s1", Resources(cpus=2, mem=2 * GB))

    async def reregister(*ended: str) -> None:
        await s1.bus.publish(
            s1.to_master,
            Reregister(
                slave_id="s1",
                hostname="s1.local",
                resources=s1.resources,
                ending=[EndingTask(framework_id="fw-1", task_id=t) for t in ended],
            ),
        )

    await reregister(*(f"a{i}" for i in range(100)))
    await eventually(lambda: len(cluster.master.books.ending) == 100)
    await reregister("b")
    await eventually(lambda: set(cluster.master.books.ending) == {("fw-1", "b")})
