"""Review 63 (on 2060393): a launch the master refuses is now remembered as ended
(`Accepts.refuse_launch`), so that reconciling it answers TASK_DROPPED. The
guard is that no live task has its id in the books (`fw.tasks`, `fw.unreachable`); but
after a failover the new leader knows no task until each slave brings its own back, and
a task remembered as ended is killed when its slave does
(`SlaveCalls`: `slave.task_already_ended`).

alice runs t0 on sa. The leader fails over; alice re-subscribes, and the Accept that
launched t0 is delivered again (MQTT delivers at least once: a broker restart before its
PUBACK, the case 2060393 was made for), naming the old leader's offer: refused
(TASK_DROPPED, TASK_LOST to alice), and t0 is now "ended" in the new leader's books. sa
comes back with t0 running, and the master kills it there. Before 2060393, t0 was taken
back as running.

In process, on the memory transport with the credentials store's ACL, the registry in
memory shared by both leaders."""

from __future__ import annotations

from pathlib import Path

import pytest

from master.authz import Caller
from protocol.wire.messages import (
    Accept,
    Error,
    Filters,
    FrameworkMessage,
    KillTask,
    Message,
    Reregister,
    RunningTask,
    TaskState,
    Teardown,
    Update,
)
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics

from harness.failover import SLAVE, failover_cluster
from harness.helpers import eventually
from harness.master import Cluster
from harness.master import cluster as cluster

T = Topics("refused")
PRINCIPALS = [("master", "master"), ("slave-a", "slave"), ("alice", "framework")]
TASK = Resources(cpus=1, mem=64)
pytestmark = pytest.mark.timeout(60)


async def test_a_launch_delivered_again_after_a_failover_does_not_get_its_running_task_killed(
    tmp_path: Path,
) -> None:
    async with failover_cluster(tmp_path, PRINCIPALS, T) as c:
        sa = await c.slave("slave-a", "sa")
        alice = await c.framework("alice")
        fid = (await alice.subscribe("a", role="alice", failover_timeout=60)).framework_id
        offer = await alice.next_offer()
        launch = Accept(
            framework_id=fid,
            offer_ids=[offer.offer_id],
            tasks=[alice.task(offer, TASK, "t0")],
            filters=Filters(refuse_seconds=5),
        )
        await alice.bus.publish(alice.to_master, launch)
        run = await sa.run_task()
        await alice.update_for("t0", TaskState.RUNNING)

        # the leader dies; a new one reads the registry and leads (sa not back yet)
        await c.fail_over()
        alice.inbox.messages.clear()
        await alice.subscribe("a", role="alice", framework_id=fid, failover_timeout=60)
        # the Accept that launched t0, delivered again
        await alice.bus.publish(alice.to_master, launch)
        dropped = await alice.update_for("t0", TaskState.LOST)  # (DROPPED, not partition-aware)
        # sa comes back, running t0
        running = RunningTask(
            framework_id=fid, task=run.task, state=TaskState.RUNNING, proof=run.proof
        )
        await sa.bus.publish(
            sa.to_master,
            Reregister(
                slave_id="sa",
                hostname="sa.local",
                resources=SLAVE,
                incarnation=sa.bus.incarnation,
                tasks=[running],
                owners={fid: "alice"},
            ),
        )
        await eventually(lambda: "sa" in c.master.books.slaves)
        target = c.master.offer_rounds.count + 3
        await eventually(lambda: c.master.offer_rounds.count >= target)
        killed = [k.task_id for k in sa.inbox.of(KillTask)]
        booked = c.master.books.frameworks[fid].tasks.get("t0")
        heard = [u.status.state.value for u in alice.inbox.of(Update)]
        said = (
            f"t0 ran on sa through the failover; the Accept that launched it, delivered "
            f"again to the new leader, was refused ({dropped.state.value}: "
            f"{dropped.message[:60]}...), t0 was remembered as ended, and when sa came back "
            f"with t0 running the master sent it KillTask {killed} (t0 booked: "
            f"{booked is not None}; alice heard {heard})"
        )
        assert not killed, said
        assert booked is not None, said


async def test_a_rate_limited_launch_says_nothing_of_a_live_task_of_its_id(
    cluster: Cluster,
) -> None:
    """An Accept refused by its principal's rate limit reports its tasks TASK_DROPPED
    (TASK_LOST): not one whose id a live task has, which runs on (a LOST would invite a
    second launch of it), as an Accept of invalid offers does not (review 63's side note)."""
    alice = await cluster.framework("A", role="a")
    s1 = await cluster.slave("s1", Resources(cpus=4, mem=1024))
    offer = await alice.next_offer()
    await alice.accept(offer, [alice.task(offer, TASK, "t0")], refuse=0)
    await s1.run_task()
    await alice.update_for("t0", TaskState.RUNNING)
    fw = cluster.master.books.frameworks[alice.framework_id]
    again = Accept(
        framework_id=alice.framework_id,
        offer_ids=["gone-offer"],
        tasks=[alice.task(offer, TASK, "t0"), alice.task(offer, TASK, "t1")],
        filters=Filters(),
    )
    caller = Caller("framework", "framework", None)
    await cluster.master.accepts.refused_accept(again, caller, "rate limit")
    await alice.update_for("t1", TaskState.LOST)  # (after any word of t0: in order)
    heard = [u.status.state for u in alice.inbox.of(Update) if u.status.task_id == "t0"]
    assert heard == [TaskState.RUNNING]
    assert fw.tasks["t0"].state == TaskState.RUNNING


async def test_a_message_to_a_slave_where_the_framework_has_no_executor_is_refused(
    cluster: Cluster,
) -> None:
    """A framework's Message goes to its executor's slave only (review 63's side note: a
    tenant's megabytes to any slave filled its topic ahead of other tenants' launches and
    kills, and the slave dropped them: it runs no such executor)."""
    mallory = await cluster.framework("M", role="m")
    s1 = await cluster.slave("s1", Resources(cpus=4, mem=1024))
    await mallory.next_offer()
    data = b"x" * 1024
    for executor in ("e1", "nobody"):
        await mallory.bus.publish(
            mallory.to_master,
            Message(
                framework_id=mallory.framework_id, slave_id="s1", executor_id=executor, data=data
            ),
        )
    await eventually(lambda: len(mallory.inbox.of(Error)) >= 2)
    errors = mallory.inbox.of(Error)
    assert {e.code for e in errors} == {"unknown-executor"}
    assert "has no executor e1 on slave s1" in errors[0].message
    assert s1.inbox.of(FrameworkMessage) == []


async def test_a_torn_down_frameworks_tasks_a_slave_brings_to_a_new_leader_die_in_its_role(
    tmp_path: Path,
) -> None:
    """After a failover, the tasks of a framework torn down before it that a slave brings
    back are held while they die in the framework's role, which its removal's record
    keeps (they were held for nobody's role: the new leader had no completed framework
    to read it from, and the tenant's next framework took the room they held)."""
    async with failover_cluster(tmp_path, PRINCIPALS, T) as c:
        sa = await c.slave("slave-a", "sa")
        alice = await c.framework("alice")
        fid = (await alice.subscribe("a", role="alice", failover_timeout=60)).framework_id
        offer = await alice.next_offer()
        await alice.accept(offer, [alice.task(offer, TASK, "t0")], refuse=5)
        run = await sa.run_task()
        await alice.update_for("t0", TaskState.RUNNING)
        sa.ends_shut_down_frameworks = False  # (its tasks die slowly: a long kill grace)
        await alice.bus.publish(alice.to_master, Teardown(framework_id=fid))
        await eventually(lambda: fid in c.master.books.removed)
        await eventually(lambda: fid in c.registry_store_removed())
        await c.fail_over()
        running = RunningTask(
            framework_id=fid, task=run.task, state=TaskState.RUNNING, proof=run.proof
        )
        back = Reregister(
            slave_id="sa",
            hostname="sa.local",
            resources=SLAVE,
            incarnation=sa.bus.incarnation,
            tasks=[running],
            owners={fid: "alice"},
        )
        await sa.bus.publish(sa.to_master, back)
        await eventually(lambda: len(c.master.books.dying) == 1)
        charged = c.master.allocator._charged
        assert set(charged) == {"alice"}, charged
        assert charged["alice"]["sa"].get("cpus") == 1000
