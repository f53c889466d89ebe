"""Review 76: after a framework fails over to a new scheduler process, the old process
still acts for it on the bus, and is never told it was replaced.

Scenario. Framework A (failover_timeout 30 s) runs task t on s1. A second scheduler
process of A's (an HA framework's standby that won its leader election, or a restart
while the old process hangs on in a network partition with the broker still reachable)
subscribes with A's framework id. The deposed process does not know yet and, as a
leader does, kills a task it thinks it no longer needs.

What Mesos does. `Master::failoverFramework` sends the old scheduler
`FrameworkErrorMessage("Framework failed over")` (the v1 API: an ERROR event, then the
stream is closed) and from then on drops every call that does not come from the
framework's current connection (`Ignoring ... because it is not from the registered
framework`; on the HTTP API a call must carry the new stream's Mesos-Stream-Id). The
failover is a fence: frameworks (Marathon, Aurora, Spark's cluster mode, any
pymesos scheduler run with a standby) rely on it so that only the newest instance can
launch or kill, and the old one learns it must stop.

What drfmesos does. On the bus, `framework_of_caller` (master/calls/framework_calls.py)
checks only that the caller's principal is the framework's: the deposed process's
Kill is carried out (the slave is told KillTask), as would be its Accepts of offers it
still holds, its Teardown of the whole framework, its acknowledgements of updates meant
for the new instance. `Subscriptions._subscribed` moves the framework to the new inbox
without a word to the old one. (The HTTP API fences by stream id, but closes the old
stream without the ERROR, so a pymesos scheduler reads it as a lost connection and
subscribes again, taking the framework back: the two instances swap it for ever.)
"""

from __future__ import annotations

import asyncio

from frameworks import Scheduler, SchedulerDriver
from protocol.wire.messages import (
    Error,
    Kill,
    KillTask,
    Reason,
    Reconcile,
    ReconcileTask,
    TaskState,
    Update,
)
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.master import GB, Cluster, T
from harness.master import cluster as cluster
from harness.mesos import Live, framework_info
from harness.mesos import live as live


async def test_a_deposed_scheduler_can_neither_kill_nor_go_on_unaware(cluster: Cluster) -> None:
    a = await cluster.framework("A", failover_timeout=30)
    s1 = await cluster.slave("s1", Resources(cpus=2, mem=2 * GB))
    offer = await a.next_offer()
    await a.accept(offer, [a.task(offer, Resources(cpus=1, mem=GB), task_id="t")])
    await s1.run_task()
    await a.update_for("t", TaskState.RUNNING)

    a2 = await cluster.framework_new_process("A2", a.framework_id)  # the failover
    to_master = T.inbound("framework", "framework")
    # the deposed process, still connected, kills t; then the new one asks about t (one
    # principal's calls are handled in the order they came: its answer comes after)
    await a.bus.publish(to_master, Kill(framework_id=a.framework_id, task_id="t"))
    await a2.bus.publish(
        to_master, Reconcile(framework_id=a.framework_id, tasks=[ReconcileTask(task_id="t")])
    )
    answer = await a2.inbox.wait_for(
        Update, lambda u: u.status.task_id == "t" and u.status.reason == Reason.RECONCILIATION
    )
    assert answer.status.state == TaskState.RUNNING
    assert s1.inbox.of(KillTask) == []  # Mesos drops the old scheduler's call
    assert any("failed over" in e.message for e in a.inbox.of(Error))  # and told it so


async def test_a_deposed_mesos_scheduler_hears_framework_failed_over(live: Live) -> None:
    s, again = live.scheduler(), live.scheduler()
    try:
        assert await s.subscribe(framework_info(failover_timeout=60)) == 200
        fid = {"value": s.framework_id}
        assert await again.subscribe(framework_info(id=fid), framework_id=fid) == 200
        async with asyncio.timeout(10):  # (the old stream is closed: its rest is finite)
            rest = [e async for e in s.events()]
        # as Mesos: an ERROR, so that a scheduler that reconnects on a closed stream
        # (pymesos does) knows it was replaced, not cut off, and does not take it back
        errors = [e["error"]["message"] for e in rest if e["type"] == "ERROR"]
        assert any("failed over" in m for m in errors), rest
    finally:
        await again.close()
        await s.close()


async def test_a_deposed_sdk_driver_stops_and_leaves_the_framework_to_its_successor(
    cluster: Cluster,
) -> None:
    driver = SchedulerDriver(
        Scheduler(), name="A", broker=cluster.connect, cluster=T.cluster, failover_timeout=30
    )
    await driver.start()
    fid = driver.framework_id or ""
    # its successor (the driver's principal: the broker's name for both processes)
    a2 = await cluster.framework(
        "A2", principal=driver.principal, framework_id=fid, failover_timeout=30
    )
    await eventually(lambda: driver.removed is not None)
    assert "failed over" in (driver.removed or "")
    await driver.join()  # (no teardown: the framework is its successor's)
    fw = cluster.master.books.frameworks[fid]
    assert fw.connected
    assert fw.inbox == a2.inbox_id
