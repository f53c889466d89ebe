"""A slave's Register delivered again after the master admitted it (the broker redelivers
a message in flight across its restart; a retry crosses the master's answer): it names
no task, and the tasks this master launched there since must not be reconciled away.
The chaos soak saw one: four tasks of a framework ended TASK_LOST while running, and a
work item ran twice at once. In process, on the memory transport."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from master.master import Master
from protocol.wire.messages import (
    EndingTask,
    Gone,
    Reconcile,
    ReconcileTask,
    Registered,
    TaskState,
    Update,
)
from protocol.wire.resources import Resources
from protocol.wire.slave import Reregister

from harness.fakes import FakeFramework, FakeSlave
from harness.helpers import eventually
from harness.master import FAST, GB, Cluster, T

TASK = Resources(cpus=1, mem=GB)


@contextlib.asynccontextmanager
async def t0_running() -> AsyncIterator[tuple[Master, FakeFramework, FakeSlave]]:
    """A master, a framework and a slave s1 (registered once), the task t0 running there."""
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        master = await c.start_master(FAST)
        fw = await c.framework("fw")
        s1 = await c.slave("s1", Resources(cpus=2, mem=2 * GB))
        offer = await fw.next_offer()
        await fw.accept(offer, [fw.task(offer, TASK, "t0")], refuse=0)
        await s1.run_task()
        await fw.update_for("t0", TaskState.RUNNING)
        yield master, fw, s1


async def test_a_register_delivered_again_leaves_the_tasks_launched_since() -> None:
    async with t0_running() as (master, fw, s1):
        told = len(s1.inbox.of(Registered))
        await s1.register()  # (the same incarnation: its first Register, again)
        await s1.inbox.wait_until(lambda: len(s1.inbox.of(Registered)) > told)
        heard = len(fw.inbox.of(Update))
        asked = Reconcile(framework_id=fw.framework_id, tasks=[ReconcileTask(task_id="t0")])
        await fw.bus.publish(fw.to_master, asked)
        await fw.inbox.wait_until(lambda: len(fw.inbox.of(Update)) > heard)
        states = [u.status.state for u in fw.inbox.of(Update) if u.status.task_id == "t0"]
        assert states[-1] == TaskState.RUNNING, states  # (not TASK_LOST: still running)
        assert (fw.framework_id, "t0") in master.books.slaves["s1"].tasks  # (its books' still)


async def test_a_register_delivered_again_after_its_connections_will_leaves_the_tasks() -> None:
    """A broker restarted from its save announces the Last Will of each connection it
    had, then delivers again what was in flight: the slave's first Register, from the
    connection whose will just came. A slave back is on a new connection (a new
    incarnation); this one names none of the tasks launched since, and is stale."""
    async with t0_running() as (master, fw, s1):
        will = Gone(kind="slave", id="slave", incarnation=s1.bus.incarnation)
        await s1.bus.publish(T.gone("slave", "slave"), will)
        await eventually(lambda: not master.books.slaves["s1"].connected)
        told = len(s1.inbox.of(Registered))
        await s1.register()  # (the same incarnation: its first Register, again)
        await s1.inbox.wait_until(lambda: len(s1.inbox.of(Registered)) > told)
        assert (fw.framework_id, "t0") in master.books.slaves["s1"].tasks
        assert master.books.frameworks[fw.framework_id].tasks["t0"].state == TaskState.RUNNING


async def test_a_reregister_delivered_again_leaves_the_tasks_launched_since() -> None:
    """The same with a Reregister (a slave whose ended tasks' updates were still owed
    names them, and no task running): it does not name the tasks launched since."""
    async with t0_running() as (master, fw, s1):
        told = len(s1.inbox.of(Registered))
        stale = Reregister(
            slave_id="s1",
            hostname="s1.local",
            resources=s1.resources,
            incarnation=s1.bus.incarnation,
            ending=[EndingTask(framework_id=fw.framework_id, task_id="before")],
        )
        await s1.bus.publish(s1.to_master, stale)
        await s1.inbox.wait_until(lambda: len(s1.inbox.of(Registered)) > told)
        assert (fw.framework_id, "t0") in master.books.slaves["s1"].tasks
        assert master.books.frameworks[fw.framework_id].tasks["t0"].state == TaskState.RUNNING
