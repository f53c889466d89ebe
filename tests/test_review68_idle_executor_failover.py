"""Review 68: after a master failover, a custom executor whose tasks have all ended (it
runs on, idle, as executors here do until their framework goes) holds its resources on
its slave, and the new leader offers them to everybody.

A slave announces itself with its live tasks only (`Registration.announce`: a Reregister of
`running`, or a plain Register when none runs), and the master learns executors from
the tasks that name them (`executors_of`); Mesos's agent re-registers with every
executor it runs (`executor_infos`). The slave still counts the executor in what is used
(`Slave.used`), so the room the new leader offers is not there: another tenant's task on
it is refused by the slave (TASK_ERROR, "needs ... but slave ... has only ... free"), and
the executor's own framework, launching on its executor again, is charged its resources
a second time.

The slave's side is played as `Registration.announce` plays it: no task runs, its executor does,
so a Reregister naming it (the rig sent a plain Register, as the slave did before the fix:
the new leader can learn the executor only from the slave's word).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from master.ha.registry import MemoryStore, Registry
from protocol.wire.messages import (
    CommandInfo,
    ExecutorInfo,
    Reregister,
    RunningExecutor,
    RunningTask,
    RunTask,
    ShutdownFramework,
    TaskState,
    Teardown,
)
from protocol.wire.resources import Resources
from slave.slave import Slave, SlaveConfig

from harness.fakes import FakeFramework, FakeSlave
from harness.helpers import eventually
from harness.master import GB, Cluster, T, master_on

EXEC = Resources(cpus=1, mem=256)
TASK = Resources(cpus=0.5, mem=64)
SLAVE = Resources(cpus=2, mem=2 * GB)


EXECUTOR = ExecutorInfo(executor_id="e1", command=CommandInfo(value="my-executor"), resources=EXEC)


async def on_executor(c: Cluster) -> tuple[FakeFramework, FakeSlave, RunTask]:
    """Framework A (failover timeout 60 s) launches task t1 on executor e1 of slave s1:
    the slave's launch, as it was sent."""
    fw = await c.framework("A", failover_timeout=60)
    slave = await c.slave("s1", SLAVE)
    offer = await fw.next_offer()
    task = fw.task(offer, TASK, "t1").model_copy(update={"executor": EXECUTOR, "command": None})
    await fw.accept(offer, [task], refuse=0)
    return fw, slave, await slave.run_task()


async def test_a_new_leader_offers_nothing_an_idle_executor_holds() -> None:
    store = MemoryStore()
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        async with master_on(c, Registry(store), "master-1") as first:
            c.master = first
            fw, slave, _ = await on_executor(c)
            await slave.report(fw.framework_id, "t1", TaskState.FINISHED)
            await fw.acknowledge(await fw.update_for("t1", TaskState.FINISHED))
            # the executor runs on, idle: this master keeps its room out of the offers
            await eventually(lambda: not first.books.slaves["s1"].tasks)
            assert first.allocator.free("s1").contains(SLAVE - EXEC)
            assert not first.allocator.free("s1").contains(SLAVE)
        registry = Registry(store)
        await registry.load()
        async with master_on(c, registry, "master-2") as second:
            # the slave hears the new leader and announces itself: no task runs, its
            # executor does (a Reregister naming it, as Registration.announce sends)
            await slave.bus.publish(
                slave.to_master,
                Reregister(
                    slave_id="s1",
                    hostname="s1.local",
                    resources=SLAVE,
                    incarnation=slave.bus.incarnation,
                    executors=[RunningExecutor(framework_id=fw.framework_id, executor=EXECUTOR)],
                ),
            )
            await eventually(lambda: "s1" in second.books.slaves)
            await fw.subscribe("A", framework_id=fw.framework_id, failover_timeout=60)
            seen = fw.offer_count()
            offer = await fw.next_offer(after=seen)
            assert not offer.resources.contains(SLAVE), (
                f"the new leader offers {offer.resources}: the whole slave, though executor "
                f"e1 holds {EXEC} of it"
            )
            # its framework back: the executor is its own again, charged once
            fw_books = second.books.frameworks[fw.framework_id]
            await eventually(lambda: ("s1", "e1") in fw_books.executors)
            assert second.allocator.allocation(fw.framework_id).contains(EXEC)
            assert not second.books.orphans


async def test_a_slave_announces_its_idle_executors(tmp_path: Path) -> None:
    """The slave's side: `Registration.announce` names an executor it runs with no task (a
    Reregister), and the master holds its room for the framework not here."""
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        await c.start_master()
        bus = await stack.enter_async_context(
            c.connect(name="s1", inbox=T.slave("slave", "s1"), will=None)
        )
        config = SlaveConfig(
            slave_id="s1",
            hostname="s1.local",
            resources=SLAVE,
            work_dir=tmp_path / "s1",
            cluster=T.cluster,
            simulated_tasks=True,
        )
        slave = Slave(bus, T, config)
        await slave.start()
        stack.push_async_callback(slave.stop)
        await slave.registered.wait()
        info = ExecutorInfo(executor_id="e1", command=CommandInfo(value="x"), resources=EXEC)
        idle: Any = SimpleNamespace(framework_id="fw-away", info=info)
        slave.executors[("fw-away", "e1")] = idle
        try:
            await slave.registration.announce()
            master = c.master
            await eventually(lambda: bool(master.books.orphans.executors_on("s1")))
            assert not master.allocator.free("s1").contains(SLAVE)
        finally:
            del slave.executors[("fw-away", "e1")]  # (not a process: nothing to stop)


async def test_a_teardown_after_failover_reaches_the_slave_of_an_idle_executor() -> None:
    """A framework torn down after a failover tells the slave where its custom executor
    outlived its tasks: the new leader learnt the task, and the executor it names, from
    the slave's re-registration, and the task then ended. The master holds the executor's
    room as dying until the slave says it has gone, so a slave never told would keep it
    out of every offer for good."""
    store = MemoryStore()
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        async with master_on(c, Registry(store), "master-1") as first:
            c.master = first
            fw, slave, run = await on_executor(c)
            await slave.report(fw.framework_id, "t1", TaskState.RUNNING)
        registry = Registry(store)
        await registry.load()
        async with master_on(c, registry, "master-2") as second:
            c.master = second
            # the slave hears the new leader and brings its running task back, with it
            # the executor the task names
            running = RunningTask(
                framework_id=fw.framework_id, task=run.task, state=TaskState.RUNNING,
                proof=run.proof,
            )  # fmt: skip
            await slave.bus.publish(
                slave.to_master,
                Reregister(
                    slave_id="s1",
                    hostname="s1.local",
                    resources=SLAVE,
                    incarnation=slave.bus.incarnation,
                    tasks=[running],
                ),
            )
            await eventually(lambda: "s1" in second.books.slaves)
            await fw.subscribe("A", framework_id=fw.framework_id, failover_timeout=60)
            books = second.books.frameworks[fw.framework_id]
            await eventually(lambda: "t1" in books.tasks and ("s1", "e1") in books.executors)
            # its task ends; the executor runs on, idle
            await slave.report(fw.framework_id, "t1", TaskState.FINISHED)
            await fw.acknowledge(await fw.update_for("t1", TaskState.FINISHED))
            await eventually(lambda: not second.books.slaves["s1"].tasks)
            await fw.bus.publish(fw.to_master, Teardown(framework_id=fw.framework_id))
            told = lambda: [  # noqa: E731
                m for m in slave.inbox.of(ShutdownFramework) if m.framework_id == fw.framework_id
            ]
            await eventually(lambda: bool(told()))
