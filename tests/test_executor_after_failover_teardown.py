"""A framework torn down after a master failover tells the slave where its custom
executor outlived its tasks.

The new leader learns the task, and the executor it names, from the slave's
re-registration. The task then ends; its executor runs on, idle, as executors here do
until their framework goes. Tearing the framework down must send that slave a
ShutdownFramework: the master holds the executor's room as dying until the slave says the
executor has gone, so a slave never told would keep it out of every offer for good.
"""

from __future__ import annotations

import contextlib

from master.ha.registry import MemoryStore, Registry
from protocol.wire.messages import (
    CommandInfo,
    ExecutorInfo,
    Reregister,
    RunningTask,
    ShutdownFramework,
    TaskState,
    Teardown,
)
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.master import GB, Cluster, master_on

EXEC = Resources(cpus=1, mem=256)
TASK = Resources(cpus=0.5, mem=64)
SLAVE = Resources(cpus=2, mem=2 * GB)


async def test_a_teardown_after_failover_reaches_the_slave_of_an_idle_executor() -> None:
    store = MemoryStore()
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        async with master_on(c, Registry(store), "master-1") as first:
            c.master = first
            fw = await c.framework("A", failover_timeout=60)
            slave = await c.slave("s1", SLAVE)
            offer = await fw.next_offer()
            executor = ExecutorInfo(
                executor_id="e1", command=CommandInfo(value="my-executor"), resources=EXEC
            )
            task = fw.task(offer, TASK, "t1").model_copy(
                update={"executor": executor, "command": None}
            )
            await fw.accept(offer, [task], refuse=0)
            run = await slave.run_task()
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
