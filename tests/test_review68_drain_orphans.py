"""Review 68: a drain neither kills nor waits for the tasks a slave brought back for a
framework the master does not know (yet): orphans (a master restarted without its
registry; review 57's "framework known only by its orphans").

The maintenance how-to: "each of its tasks is killed ...", "The slave is `draining`
until it has no task left". `Drains.check` reads only `slave.tasks`, where an orphan is
not (it is in `books.orphans`): the slave is DRAINED at once with the task running on
it, no KillTask is sent, and a drain with `--mark-gone` removes the slave (gone for good)
while its task still runs there -- an operator who stops the machine on DRAINED loses
it. When the framework then subscribes and takes its task back, the slave is DRAINED
and nothing kills it. The same for a torn-down framework's tasks still in their kill
grace (held dying, out of `slave.tasks` too): DRAINED at once, their grace not cut to
the drain's.
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

from master.books import DRAINING
from protocol import logs
from protocol.transport.aio import within
from protocol.wire.messages import (
    DrainSlave,
    KillTask,
    Registered,
    Reregister,
    RunningTask,
    ShutdownFramework,
    TaskState,
    Teardown,
)
from protocol.wire.resources import Resources
from slave.kills import Kills

from harness.drain import ANY_OFFER, SMALL, operator
from harness.helpers import eventually
from harness.master import GB, Cluster
from harness.master import cluster as cluster


async def drain(c: Cluster, message: DrainSlave) -> None:
    """`message` from operator principal ops."""
    await (await operator(c)).call(message)


async def test_a_drain_kills_and_waits_for_a_task_of_a_framework_not_back_yet(
    cluster: Cluster,
) -> None:
    master = cluster.master
    # the slave comes back (this master never knew the framework) running its task
    slave = await cluster.slave("s1", Resources(cpus=4, mem=4 * GB))
    await slave.inbox.wait_for(Registered)
    fw = await cluster.framework("A")  # (a framework only to build the TaskInfo with)
    await slave.bus.publish(
        slave.to_master,
        Reregister(
            slave_id="s1",
            hostname="s1.local",
            resources=slave.resources,
            incarnation=slave.bus.incarnation,
            tasks=[
                RunningTask(
                    framework_id="ghost-framework",
                    task=fw.task(ANY_OFFER, SMALL, "t1"),
                    state=TaskState.RUNNING,
                )
            ],
        ),
    )
    await eventually(lambda: bool(master.books.orphans.on("s1")))
    await drain(cluster, DrainSlave(slave_id="s1", max_grace_period=5))
    await eventually(lambda: "s1" in master.books.maintenance)
    master.drains.check()
    state = master.books.maintenance["s1"].drain
    killed = [k.task_id for k in slave.inbox.of(KillTask)]
    assert state == DRAINING, (
        f"the slave is {state} while task t1 runs there (orphaned), killed: {killed}"
    )
    await slave.inbox.wait_for(KillTask, lambda k: k.task_id == "t1")


async def test_a_drain_waits_for_a_torn_down_frameworks_task_still_in_its_grace(
    cluster: Cluster,
) -> None:
    """The same for a removed framework's tasks in their kill grace (held as dying, out
    of `slave.tasks`): a tenant tears its framework down, its task traps SIGTERM for its
    60 s grace; the operator drains with a grace of 1 s and is told DRAINED at once, the
    task running on (and its grace not cut to the drain's)."""
    master = cluster.master
    fw = await cluster.framework("A")
    slave = await cluster.slave("s1", Resources(cpus=4, mem=4 * GB))
    slave.ends_shut_down_frameworks = False  # (its task waits out its grace)
    offer = await fw.next_offer()
    await fw.accept(offer, [fw.task(offer, SMALL, "t1")], refuse=0)
    await slave.run_task()
    await fw.update_for("t1", TaskState.RUNNING)
    await fw.bus.publish(fw.to_master, Teardown(framework_id=fw.framework_id))
    await slave.inbox.wait_for(ShutdownFramework)
    await eventually(lambda: len(master.books.dying) == 1)  # (held until the slave says)
    await drain(cluster, DrainSlave(slave_id="s1", max_grace_period=1))
    await eventually(lambda: "s1" in master.books.maintenance)
    master.drains.check()
    state = master.books.maintenance["s1"].drain
    assert state == DRAINING, f"the slave is {state} while torn-down task t1 is in its grace"
    # and its grace cut to the drain's: the slave told so
    cut = await slave.inbox.wait_for(ShutdownFramework, lambda m: m.grace_cap is not None)
    assert cut.framework_id == fw.framework_id
    assert cut.grace_cap == 1


async def test_a_slave_cuts_the_grace_of_a_shut_down_frameworks_kills() -> None:
    """The slave's side: a ShutdownFramework with a cap brings the SIGKILL of the
    framework's tasks already in their grace forward (a runner's kill again, shorter)."""

    class Runner:
        def __init__(self) -> None:
            self.graces: list[float] = []
            self.sooner = asyncio.Event()

        async def kill(self, grace: float, limit: Any = None, **_: Any) -> None:
            self.graces.append(grace)
            if len(self.graces) == 1:
                await self.sooner.wait()  # (its grace, until a shorter kill ends it)
            else:
                self.sooner.set()

    runner = Runner()
    info = SimpleNamespace(task_id="t1")
    record: Any = SimpleNamespace(
        framework_id="A", info=info, runner=runner, state=TaskState.RUNNING, kill=None
    )
    checkpointed: list[Any] = []
    kills = Kills(logs.get("test"), checkpointed.append)
    kills.start(record, 60.0)
    kills.cut("A", 1.0)
    kills.cut("B", 1.0)  # (nothing of B's)
    await within(kills.finish(), 5.0)
    assert runner.graces == [60.0, 1.0]
    assert not kills.of("A")
    # the kill is checkpointed with its task as cut: a restarted slave resumes that
    assert checkpointed == [record, record]
    assert record.kill.until <= time.time() + 1.0
