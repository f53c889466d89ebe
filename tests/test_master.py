"""The master in process on the in-memory transport, spoken to by bare protocol fakes (no SDK
in between). tests/test_bus.py and the live tests cover the real broker."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from master.books import COMPLETED, Books, Framework
from master.master import MasterConfig
from protocol.wire.codec import encode
from protocol.wire.messages import (
    Accept,
    Acknowledge,
    Error,
    Failure,
    Filters,
    FrameworkCapability,
    Gone,
    OfferOperation,
    Reason,
    Reconcile,
    ReconcileTask,
    Request,
    Reregister,
    Rescind,
    Revive,
    RunningTask,
    ShutdownFramework,
    Source,
    StatusAck,
    StatusUpdate,
    Subscribe,
    Suppress,
    TaskRequest,
    TaskState,
    TaskStatus,
    Teardown,
    Update,
    new_id,
)
from protocol.wire.resources import Resources
from protocol.wire.slave import CheckpointResources

from harness.fakes import FakeFramework, FakeSlave, operate
from harness.helpers import books_balance, eventually
from harness.master import FAST, GB, Cluster, T, encode_raw
from harness.master import cluster as cluster


async def test_offers_go_to_the_lowest_dominant_share_first(cluster: Cluster) -> None:
    a = await cluster.framework("A")
    s1 = await cluster.slave("s1", Resources(cpus=4, mem=4 * GB))
    offer = await a.next_offer()
    assert offer.slave_id == "s1"
    assert offer.resources == Resources(cpus=4, mem=4 * GB)
    await a.accept(offer, [a.task(offer, Resources(cpus=2, mem=1 * GB))], refuse=1000)
    await s1.run_task()

    b = await cluster.framework("B")
    rest = await b.next_offer()  # what A left of s1 goes to B, whose share is 0
    assert rest.resources == Resources(cpus=2, mem=3 * GB)
    await b.decline(rest, refuse=1000)
    await cluster.slave("s2", Resources(cpus=4, mem=4 * GB))
    nxt = await b.next_offer(after=1)  # B (0%) comes before A (25% of cpus) for s2
    assert nxt.slave_id == "s2"
    assert a.offer_count() == 1
    books_balance(cluster.master)


async def test_slaves_are_spread_over_equal_frameworks(cluster: Cluster) -> None:
    fws = [await cluster.framework(n) for n in ("A", "B", "C")]
    for i in range(6):
        await cluster.slave(f"s{i}", Resources(cpus=2, mem=2 * GB))
    await eventually(lambda: sum(f.offer_count() for f in fws) == 6)
    assert [f.offer_count() for f in fws] == [2, 2, 2]


async def test_decline_filter_holds_for_refuse_seconds_and_revive_clears_it(
    cluster: Cluster,
) -> None:
    a = await cluster.framework("A")
    await cluster.slave("s1", Resources(cpus=1, mem=GB))
    first = await a.next_offer()
    await a.decline(first, refuse=0.6)
    loop = asyncio.get_running_loop()
    declined_at = loop.time()
    second = await a.next_offer(after=1)
    assert loop.time() - declined_at >= 0.5  # not offered again before the filter ran out
    assert second.resources == first.resources

    await a.decline(second, refuse=1000)
    await cluster.rounds_pass(5)
    assert a.offer_count() == 2  # filtered: many rounds, no offer
    await a.bus.publish(T.inbound("framework", "framework"), Revive(framework_id=a.framework_id))
    third = await a.next_offer(after=2)
    assert third.slave_id == "s1"


async def test_an_oversized_accept_gets_task_error_and_the_resources_come_back(
    cluster: Cluster,
) -> None:
    a = await cluster.framework("A")
    s1 = await cluster.slave("s1", Resources(cpus=2, mem=2 * GB))
    offer = await a.next_offer()
    big = a.task(offer, Resources(cpus=3, mem=GB), task_id="too-big")
    ok = a.task(offer, Resources(cpus=1, mem=GB), task_id="fits")
    await a.accept(offer, [big, ok], refuse=0)
    status = await a.update_for("too-big", TaskState.ERROR)
    assert status.reason == Reason.TASK_INVALID
    assert "cpus:3" in status.message
    assert "left of the offer" in status.message
    assert status.source == Source.MASTER
    run = await s1.run_task()
    assert run.task.task_id == "fits"  # the valid task was launched
    again = await a.next_offer(after=1)  # the unused part comes straight back
    assert again.resources == Resources(cpus=1, mem=GB)
    books_balance(cluster.master)
    assert not a.inbox.of(Error)  # the update is the answer: an Error means removed
    assert cluster.master.outbox.refused["invalid-tasks"] == 1  # (and a log line)


async def test_an_accept_delivered_twice_says_nothing_false_of_the_task_it_launched(
    cluster: Cluster,
) -> None:
    """MQTT delivers at least once: an Accept whose PUBACK a reconnect lost comes again.
    One of its tasks was refused the first time, so it is not "launched before" as a
    whole; its running task must not be reported LOST (a second launch would follow)."""
    slave = await cluster.slave("s1", Resources(cpus=4, mem=GB))
    a = await cluster.framework("A")
    offer = await a.next_offer()
    good = a.task(offer, Resources(cpus=1, mem=32), task_id="good")
    too_big = a.task(offer, Resources(cpus=100, mem=32), task_id="too-big")
    accept = Accept(
        framework_id=a.framework_id,
        offer_ids=[offer.offer_id],
        tasks=[good, too_big],
        filters=Filters(refuse_seconds=5),
    )
    await a.bus.publish(a.to_master, accept)
    await slave.run_task()
    await a.update_for("good", TaskState.RUNNING)
    await a.update_for("too-big", TaskState.ERROR)
    await a.bus.publish(a.to_master, accept)  # the redelivery: known by its offer
    await eventually(lambda: cluster.master.messages.received["Accept"] >= 2)
    await cluster.rounds_pass(2)  # (it was handled, and answered nothing)
    said = [(u.status.task_id, u.status.state) for u in a.inbox.of(Update)]
    assert said == [("too-big", TaskState.ERROR), ("good", TaskState.RUNNING)]
    assert cluster.master.books.frameworks[a.framework_id].slave_of("good") == "s1"


async def test_a_task_id_reused_after_its_task_ended_hears_why_its_launch_failed(
    cluster: Cluster,
) -> None:
    """A task id is free again once its task ended (as in Mesos): a launch of it on an
    offer no longer outstanding is told TASK_LOST, not taken for an Accept sent again."""
    s1 = await cluster.slave("s1", Resources(cpus=4, mem=GB))
    a = await cluster.framework("A")
    offer = await a.next_offer()
    await a.accept(offer, [a.task(offer, Resources(cpus=1, mem=32), task_id="t")], refuse=0)
    await s1.run_task()
    await a.update_for("t", TaskState.RUNNING)
    await s1.report(a.framework_id, "t", TaskState.FINISHED)
    await a.update_for("t", TaskState.FINISHED)
    fresh = await a.next_offer(after=a.offer_count())
    await a.decline(fresh, refuse=0)  # its offer is gone
    seen = len(a.inbox.of(Update))
    await a.accept(fresh, [a.task(fresh, Resources(cpus=1, mem=32), task_id="t")], refuse=0)
    await a.inbox.wait_until(lambda: len(a.inbox.of(Update)) > seen)
    assert a.inbox.of(Update)[-1].status.state == TaskState.LOST


async def test_a_slave_whose_connection_dies_is_offered_to_nobody_then_its_tasks_are_lost() -> None:
    """As Mesos: the Last Will disconnects the slave (its tasks may still run and a
    restarted slave recovers them); only a slave that stays away is removed."""
    async with contextlib.AsyncExitStack() as stack:
        cluster = Cluster(stack)
        await cluster.start_master(
            MasterConfig(allocation_interval=0.05, heartbeat_interval=0.2, slave_timeout=1.0)
        )
        a = await cluster.framework("A")
        s1 = await cluster.slave("s1", Resources(cpus=2, mem=2 * GB))
        offer = await a.next_offer()
        task = a.task(offer, Resources(cpus=1, mem=GB), task_id="doomed")
        await a.accept(offer, [task], refuse=0)
        await s1.run_task()
        await a.update_for("doomed", TaskState.RUNNING)
        rest = await a.next_offer(after=1)  # what is left of s1 comes back
        # the broker announces the slave's Last Will (a stale incarnation is ignored)
        await s1.bus.publish(
            T.gone("slave", "slave"), Gone(kind="slave", id="slave", incarnation="old")
        )
        await s1.bus.publish(
            T.gone("slave", "slave"),
            Gone(kind="slave", id="slave", incarnation=s1.bus.incarnation),
        )
        rescind = await a.inbox.wait_for(Rescind)
        assert rescind.offer_id == rest.offer_id
        assert not cluster.master.books.slaves["s1"].connected
        offers = a.offer_count()
        await cluster.rounds_pass(5)
        assert a.offer_count() == offers  # nothing of a disconnected slave is offered
        lost = await a.update_for("doomed", TaskState.LOST)
        assert lost.reason == Reason.SLAVE_REMOVED
        assert lost.uuid  # the master wants this one acknowledged
        failure = await a.inbox.wait_for(Failure)
        assert failure.slave_id == "s1"
        assert "s1" not in cluster.master.books.slaves
        assert cluster.master.allocator.total == Resources()
        books_balance(cluster.master)


async def test_a_slave_whose_heartbeats_stop_is_removed() -> None:
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        await c.start_master(MasterConfig(allocation_interval=0.05, slave_timeout=0.5))
        a = await c.framework("A")
        s1 = await c.slave("s1", Resources(cpus=1, mem=GB))
        offer = await a.next_offer()
        await a.accept(offer, [a.task(offer, Resources(cpus=1), task_id="t1")])
        await s1.run_task()
        lost = await a.update_for("t1", TaskState.LOST)
        assert "no heartbeat" in lost.message


async def test_a_status_update_is_acked_to_the_slave_once_its_framework_acknowledges_it(
    cluster: Cluster,
) -> None:
    """As Mesos: the slave keeps (and re-sends) an update until the framework has it, so
    an update the master held when it failed over is not lost."""
    a = await cluster.framework("A")
    s1 = await cluster.slave("s1", Resources(cpus=1, mem=GB))
    offer = await a.next_offer()
    await a.accept(offer, [a.task(offer, Resources(cpus=1), task_id="t1")])
    uuid = await s1.report(a.framework_id, "t1", TaskState.RUNNING)
    # the framework does not acknowledge: the update comes again, with the same uuid
    await a.inbox.wait_count(Update, 2)
    assert {u.status.uuid for u in a.inbox.of(Update)} == {uuid}
    assert s1.inbox.of(StatusAck) == []  # ... and the slave must keep it
    await a.bus.publish(
        T.inbound("framework", "framework"),
        Acknowledge(framework_id=a.framework_id, slave_id="s1", task_id="t1", uuid=uuid),
    )
    ack = await s1.inbox.wait_for(StatusAck, lambda x: x.uuid == uuid)
    assert ack.task_id == "t1"
    assert not cluster.master.books.frameworks[a.framework_id].pending
    # a duplicate from the slave (the ack crossed it) is acknowledged again, and not
    # forwarded: the framework has it (a slave's next update waits for this ack)
    heard = len(a.inbox.of(Update))
    await s1.bus.publish(
        T.inbound("slave", "slave"),
        StatusUpdate(
            framework_id=a.framework_id,
            slave_id="s1",
            status=a.inbox.of(Update)[0].status,
        ),
    )
    await s1.inbox.wait_until(lambda: [x.uuid for x in s1.inbox.of(StatusAck)] == [uuid] * 2)
    await a.bus.publish(  # (its answer comes after anything sent to the framework before)
        T.inbound("framework", "framework"),
        Reconcile(framework_id=a.framework_id, tasks=[ReconcileTask(task_id="t1")]),
    )
    await a.inbox.wait_count(Update, heard + 1)
    assert [u.status.reason for u in a.inbox.of(Update)[heard:]] == [Reason.RECONCILIATION]


async def test_a_framework_that_resubscribes_in_time_keeps_its_tasks(cluster: Cluster) -> None:
    a = await cluster.framework("A", failover_timeout=30)
    s1 = await cluster.slave("s1", Resources(cpus=2, mem=2 * GB))
    offer = await a.next_offer()
    await a.accept(offer, [a.task(offer, Resources(cpus=1, mem=GB), task_id="keep")])
    await s1.run_task()
    await a.update_for("keep", TaskState.RUNNING)
    framework_id = a.framework_id
    # its connection drops: the broker publishes its Last Will
    await a.bus.publish(
        T.gone("framework", "framework"),
        Gone(kind="framework", id="A", incarnation=a.bus.incarnation),
    )
    await eventually(lambda: not cluster.master.books.frameworks[framework_id].connected)
    assert framework_id in cluster.master.books.frameworks

    # a new process (new inbox) comes back with the same framework id
    a2 = await cluster.framework_new_process("A2", framework_id)
    assert a2.framework_id == framework_id
    await a2.bus.publish(T.inbound("framework", "framework"), Reconcile(framework_id=framework_id))
    # (the RUNNING it never acknowledged comes again first; then the master's answer)
    answer = await a2.inbox.wait_for(
        Update, lambda u: u.status.task_id == "keep" and u.status.reason == Reason.RECONCILIATION
    )
    assert answer.status.state == TaskState.RUNNING
    assert s1.inbox.of(ShutdownFramework) == []


async def test_a_framework_back_from_a_failover_hears_a_tasks_updates_in_order(
    cluster: Cluster,
) -> None:
    # (the chaos soak's case: a task went RUNNING while its scheduler was down, and ended
    # just after the new scheduler subscribed; the owed RUNNING must not come after the end)
    a = await cluster.framework("A", failover_timeout=30)
    s1 = await cluster.slave("s1", Resources(cpus=2, mem=2 * GB))
    offer = await a.next_offer()
    await a.accept(offer, [a.task(offer, Resources(cpus=1, mem=GB), task_id="t")])
    framework_id = a.framework_id
    await a.bus.publish(
        T.gone("framework", "framework"),
        Gone(kind="framework", id="A", incarnation=a.bus.incarnation),
    )
    await eventually(lambda: not cluster.master.books.frameworks[framework_id].connected)
    await s1.run_task()  # RUNNING, owed to a framework that is away
    await eventually(lambda: len(cluster.master.books.frameworks[framework_id].pending) == 1)

    a2 = await cluster.framework_new_process("A2", framework_id)
    await s1.report(framework_id, "t", TaskState.FINISHED)  # at once after it is back
    await a2.update_for("t", TaskState.FINISHED)
    await a2.update_for("t", TaskState.RUNNING)
    states = [u.status.state for u in a2.inbox.of(Update) if u.status.task_id == "t"]
    assert states[:2] == [TaskState.RUNNING, TaskState.FINISHED]


async def test_a_framework_without_failover_timeout_loses_its_tasks(cluster: Cluster) -> None:
    a = await cluster.framework("A")
    s1 = await cluster.slave("s1", Resources(cpus=2, mem=2 * GB))
    offer = await a.next_offer()
    await a.accept(offer, [a.task(offer, Resources(cpus=1, mem=GB), task_id="gone")])
    await s1.run_task()
    await a.bus.publish(
        T.gone("framework", "framework"),
        Gone(kind="framework", id="A", incarnation=a.bus.incarnation),
    )
    shutdown = await s1.inbox.wait_for(ShutdownFramework)
    assert shutdown.framework_id == a.framework_id
    # free once the slave says its task has ended (FakeSlave: at once)
    await eventually(lambda: cluster.master.allocator.allocated_total() == Resources())
    # and yet it is not forgotten: its task is listed, ended with it (completed frameworks)
    [task], total = cluster.master.views.task_views(a.framework_id, "TASK_KILLED")
    assert (task.task_id, task.reason, total) == ("gone", Reason.FRAMEWORK_REMOVED, 1)


def test_removed_frameworks_are_kept_for_the_api_boundedly() -> None:
    books = Books()
    for i in range(COMPLETED + 5):
        fw = Framework(f"fw{i}", "p", f"n{i}", "r", "inbox", "inc", 0.0, 0.0)
        books.frameworks[fw.framework_id] = fw
        books.forget_framework(fw, "torn down")
    assert list(books.completed_frameworks) == [f"fw{i}" for i in range(5, COMPLETED + 5)]
    assert not books.frameworks


def test_one_principals_removals_push_out_only_its_own_completed_frameworks() -> None:
    """The bound is a principal's (review 63's side note: one tenant tearing down 50
    frameworks pushed every other tenant's completed frameworks out of the API)."""
    books = Books()
    for i, principal in enumerate(["alice", *["mallory"] * (COMPLETED + 10)]):
        fw = Framework(f"fw{i}", principal, f"n{i}", "r", "inbox", "inc", 0.0, 0.0)
        books.frameworks[fw.framework_id] = fw
        books.forget_framework(fw, "torn down")
    kept = list(books.completed_frameworks)
    assert kept[0] == "fw0"  # alice's
    assert len(kept) == 1 + COMPLETED


async def test_hostile_input_gets_errors_and_leaves_the_books_intact(cluster: Cluster) -> None:
    a = await cluster.framework("A")
    b = await cluster.framework("B")
    await cluster.slave("s1", Resources(cpus=4, mem=4 * GB))
    await cluster.slave("s2", Resources(cpus=4, mem=4 * GB))
    offer_a = await a.next_offer()
    offer_b = await b.next_offer()
    await a.accept(offer_a, [a.task(offer_a, Resources(cpus=1), task_id="dup")], refuse=1000)
    total_before = cluster.master.allocator.total

    attacks: list[Callable[[], Awaitable[None]]] = [
        lambda: a.bus.publish_raw(T.inbound("framework", "framework"), b"\x93\x01garbage"),
        lambda: a.bus.publish_raw(
            T.inbound("framework", "framework"),
            encode_raw("Accept", a.bus.inbox, {"framework_id": 5}),
        ),
        lambda: a.bus.publish_raw(
            T.inbound("framework", "framework"),
            encode(
                Update.model_validate({"status": {"task_id": "x", "state": "TASK_RUNNING"}}),
                a.bus.inbox,
            ),
        ),
        lambda: a.bus.publish(
            T.inbound("framework", "framework"),
            Accept(framework_id=a.framework_id, offer_ids=["no-such-offer"], tasks=[]),
        ),
        lambda: a.bus.publish(
            T.inbound("framework", "framework"),
            Accept(framework_id=a.framework_id, offer_ids=[offer_b.offer_id], tasks=[]),
        ),
        lambda: a.bus.publish(
            T.inbound("framework", "framework"), Accept(framework_id="nobody", offer_ids=["x"])
        ),
    ]
    for attack in attacks:
        await attack()
    # garbage names no sender; an Accept of bad offers with no tasks is refused with a log
    # line only (its tasks' updates would be the answer: an Error means removed)
    errors = await a.inbox.wait_count(Error, len(attacks) - 3)
    codes = [e.code for e in errors]
    assert codes.count("invalid") == 1
    assert "forbidden" in codes  # a framework may not send an Update
    assert "unknown-framework" in codes
    await eventually(lambda: cluster.master.outbox.refused["invalid-offers"] == 2)
    assert "invalid-offers" not in codes

    # a duplicate task id on a fresh offer (a new slave goes to A, the lowest share):
    # TASK_ERROR, nothing launched
    await cluster.slave("s3", Resources(cpus=4, mem=4 * GB))
    fresh = await a.next_offer(after=1)
    await a.accept(fresh, [a.task(fresh, Resources(cpus=1), task_id="dup")])
    dup = await a.update_for("dup", TaskState.ERROR)
    assert "already in use" in dup.message

    # B's offer survived A's attempt to take it, and the books still balance
    assert offer_b.offer_id in cluster.master.books.offers
    assert cluster.master.allocator.total == total_before + Resources(cpus=4, mem=4 * GB)
    books_balance(cluster.master)
    await b.accept(offer_b, [b.task(offer_b, Resources(cpus=1))])
    await eventually(lambda: offer_b.offer_id not in cluster.master.books.offers)
    books_balance(cluster.master)


async def test_offer_timeout_rescinds_unanswered_offers() -> None:
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        await c.start_master(MasterConfig(allocation_interval=0.05, offer_timeout=0.3))
        a = await c.framework("A")
        await c.slave("s1", Resources(cpus=1, mem=GB))
        offer = await a.next_offer()
        rescind = await a.inbox.wait_for(Rescind)
        assert rescind.offer_id == offer.offer_id
        again = await a.next_offer(after=1)  # the resources return and are offered anew
        assert again.offer_id != offer.offer_id


async def test_a_removed_framework_is_told_and_cannot_come_back(cluster: Cluster) -> None:
    """As Mesos: ERROR "Framework has been removed" when torn down, and again if it tries
    to re-subscribe after its failover timeout passed."""
    a = await cluster.framework("A", failover_timeout=0.2)
    framework_id = a.framework_id
    await a.bus.publish(
        T.gone("framework", "framework"),
        Gone(kind="framework", id="A", incarnation=a.bus.incarnation),
    )
    await eventually(lambda: framework_id not in cluster.master.books.frameworks)
    back = FakeFramework(a.bus, T, "A")
    await a.bus.publish(
        back.to_master,
        Subscribe(name="A", inbox="A", framework_id=framework_id, incarnation=a.bus.incarnation),
    )
    error = await a.inbox.wait_for(Error, lambda e: e.code == "framework-removed")
    assert error.message == "Framework has been removed: failover timeout 0.2s passed"
    assert framework_id not in cluster.master.books.frameworks

    b = await cluster.framework("B")
    await b.bus.publish(b.to_master, Teardown(framework_id=b.framework_id))
    told = await b.inbox.wait_for(Error, lambda e: e.code == "framework-removed")
    assert told.message.startswith("Framework has been removed: torn down by its scheduler")
    books_balance(cluster.master)


async def test_declared_demand_is_kept_counted_down_cleared_and_checked(cluster: Cluster) -> None:
    a = await cluster.framework("A")
    await cluster.slave("s1", Resources(cpus=4, mem=4 * GB))
    small = Resources(cpus=1, mem=GB)
    await a.bus.publish(
        a.to_master,
        Request(framework_id=a.framework_id, requests=[TaskRequest(resources=small, count=3)]),
    )
    master = cluster.master
    await eventually(lambda: master.books.frameworks[a.framework_id].demand is not None)

    # what no slave has, and a count of none, are refused and change nothing
    await a.bus.publish(
        a.to_master,
        Request(
            framework_id=a.framework_id,
            requests=[TaskRequest(resources=Resources(gpus=1), count=1)],
        ),
    )
    none = {"framework_id": a.framework_id, "requests": [{"resources": {"cpus": 1}, "count": 0}]}
    await a.bus.publish_raw(a.to_master, encode_raw("Request", a.bus.inbox, none))
    errors = await a.inbox.wait_count(Error, 2)
    assert {e.code for e in errors} == {"invalid-request", "invalid"}
    assert any("no slave has gpus" in e.message for e in errors)
    fw = master.books.frameworks[a.framework_id]
    assert [(r.resources, r.count) for r in fw.demand or []] == [(small, 3)]

    # a launch of the declared size counts one off; suppress clears the rest
    offer = await a.next_offer()
    await a.accept(offer, [a.task(offer, small)])
    await eventually(lambda: [r.count for r in fw.demand or []] == [2])
    await a.bus.publish(a.to_master, Suppress(framework_id=a.framework_id))
    await eventually(lambda: fw.demand == [])


@pytest.mark.parametrize(
    ("headroom", "offered"),
    [("all", Resources(cpus=2, mem=2048)), ("demand", Resources(cpus=4, mem=4096))],
)
async def test_a_guarantee_is_kept_free_for_a_role_with_no_framework_unless_headroom_is_demand(
    tmp_path: Path, headroom: str, offered: Resources
) -> None:
    """`--quota-headroom all` (Mesos's): prod's unmet guarantee stays free though no
    framework of prod is here; `demand`: batch is offered the whole slave."""
    roles = tmp_path / "roles.yaml"
    roles.write_text("roles:\n  prod: {quota: {guarantee: {cpus: 2, mem: 2048}}}\n")
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        await c.start_master(dataclasses.replace(FAST, roles=roles, quota_headroom=headroom))
        await c.slave("s1", Resources(cpus=4, mem=4096))
        batch = await c.framework("batch", role="batch")
        assert (await batch.next_offer()).resources == offered
        await c.rounds_pass()
        assert batch.offer_count() == 1  # and nothing more of the slave


@pytest.mark.parametrize("aware", [False, True], ids=["lost", "partition-aware"])
async def test_a_slave_that_reregisters_without_a_task_has_it_gone(
    cluster: Cluster, aware: bool
) -> None:
    """As a Mesos slave answers reconciliation of a task it does not have: started and
    vanished, TASK_GONE (TASK_LOST to a framework not partition-aware)."""
    caps = [FrameworkCapability.PARTITION_AWARE] if aware else []
    a = await cluster.framework("A", capabilities=caps)
    s1 = await cluster.slave("s1", Resources(cpus=2, mem=2 * GB))
    offer = await a.next_offer()
    await a.accept(offer, [a.task(offer, Resources(cpus=1, mem=GB), task_id="t1")], refuse=0)
    await s1.run_task()
    await a.update_for("t1", TaskState.RUNNING)
    await s1.bus.publish(
        s1.to_master,
        Reregister(slave_id="s1", hostname="s1.local", resources=s1.resources, tasks=[]),
    )
    state = TaskState.GONE if aware else TaskState.LOST
    gone = await a.update_for("t1", state)
    assert (gone.reason, gone.source) == (Reason.RECONCILIATION, Source.MASTER)
    await eventually(lambda: not cluster.master.books.frameworks[a.framework_id].tasks)
    books_balance(cluster.master)


async def test_a_slave_back_on_a_new_connection_has_its_offers_taken_back_and_made_again(
    cluster: Cluster,
) -> None:
    """As Mesos's master does when an agent re-registers: an offer of it that was never
    answered is rescinded (a restart may have changed what it has), and its resources are
    offered again; else the unanswered offer held the slave from everyone."""
    a = await cluster.framework("A")
    s1 = await cluster.slave("s1", Resources(cpus=2, mem=2 * GB))
    before = await a.next_offer()
    seen = a.offer_count()
    await s1.bus.publish(
        s1.to_master,
        Reregister(
            slave_id="s1", hostname="s1.local", resources=s1.resources, tasks=[],
            incarnation="restarted",
        ),
    )  # fmt: skip
    await a.inbox.wait_for(Rescind, lambda r: r.offer_id == before.offer_id)
    again = await a.next_offer(after=seen)
    assert again.resources == before.resources
    assert again.offer_id != before.offer_id
    books_balance(cluster.master)


async def test_a_slave_back_with_other_resources_is_offered_what_it_has_now(
    cluster: Cluster,
) -> None:
    """Restarted with a smaller `--resources` while its task runs on: the master takes
    its word (as Mesos's takes a reconfigured agent's), the task keeps what it holds, and
    nothing it no longer has is offered (each launch of it would be refused)."""
    a = await cluster.framework("A")
    s1 = await cluster.slave("s1", Resources(cpus=8, mem=8 * GB))
    offer = await a.next_offer()
    task = a.task(offer, Resources(cpus=1, mem=GB), task_id="t1")
    await a.accept(offer, [task], refuse=0)
    run = await s1.run_task()
    seen = a.offer_count()
    running = RunningTask(framework_id=a.framework_id, task=run.task, state=TaskState.RUNNING)
    smaller = Resources(cpus=2, mem=2 * GB)
    await s1.bus.publish(
        s1.to_master,
        Reregister(
            slave_id="s1", hostname="s1.local", resources=smaller, tasks=[running],
            incarnation="restarted",
        ),
    )  # fmt: skip
    again = await a.next_offer(after=seen)
    assert again.resources == Resources(cpus=1, mem=GB)  # its new total less t1's
    assert cluster.master.books.slaves["s1"].total == smaller
    assert cluster.master.allocator.total == smaller
    books_balance(cluster.master)


async def test_a_slave_back_with_other_attributes_is_offered_to_those_who_declined_it(
    cluster: Cluster,
) -> None:
    """As Mesos's allocator drops a slave's offer filters when it comes back with other
    attributes: a framework may have declined it for the ones it had. The same attributes
    again leave the filter standing."""
    a = await cluster.framework("A")
    s1 = await cluster.slave("s1", Resources(cpus=2, mem=2 * GB))
    await a.decline(await a.next_offer(), refuse=1000)
    seen = a.offer_count()

    async def back(attributes: dict[str, str], incarnation: str) -> None:
        await s1.bus.publish(
            s1.to_master,
            Reregister(
                slave_id="s1", hostname="s1.local", resources=s1.resources, tasks=[],
                attributes=attributes, incarnation=incarnation,
            ),
        )  # fmt: skip

    await back({}, "same-attributes")
    await cluster.rounds_pass(5)
    assert a.offer_count() == seen  # its decline stands
    await back({"rack": "r2"}, "new-attributes")
    again = await a.next_offer(after=seen)
    assert again.slave_id == "s1"
    books_balance(cluster.master)


async def reserved_two_cpus(cluster: Cluster) -> FakeSlave:
    """Slave s1 (4 cpus), 2 of them reserved by framework A of role team (RESERVE), the
    slave told so once."""
    a = await cluster.framework("A", role="team")
    s1 = await cluster.slave("s1", Resources(cpus=4, mem=4 * GB))
    offer = await a.next_offer()
    reserve = OfferOperation(type="RESERVE", resources=Resources.parse("cpus(team,):2"))
    await operate(a, offer, reserve)
    await s1.inbox.wait_for(CheckpointResources)
    return s1


async def test_a_slave_that_missed_a_reservation_is_told_it_again(cluster: Cluster) -> None:
    """The same amounts, reserved otherwise (a RESERVE's checkpoint it missed while away):
    the master's word on reservations stands and is sent again, as Mesos's master does."""
    s1 = await reserved_two_cpus(cluster)
    reserved = cluster.master.books.slaves["s1"].total
    assert reserved == Resources.parse("cpus:2;cpus(team,framework):2;mem:4096")
    await s1.bus.publish(
        s1.to_master,
        Reregister(slave_id="s1", hostname="s1.local", resources=s1.resources, tasks=[]),
    )
    await s1.inbox.wait_until(lambda: len(s1.inbox.of(CheckpointResources)) > 1)
    told = s1.inbox.of(CheckpointResources)[-1]
    assert told.resources == Resources.parse("cpus(team,framework):2")
    assert cluster.master.books.slaves["s1"].total == reserved
    assert cluster.master.allocator.total == Resources(cpus=4, mem=4 * GB)  # (whoever's)


async def test_a_slave_back_without_its_static_reservation_is_offered_as_it_is(
    cluster: Cluster,
) -> None:
    """Restarted with `cpus:4` for `cpus(team):4`: the same amounts, no longer reserved.
    Its --resources are its word; kept as they were, the master offered team alone what
    the slave no longer reserves, and everyone else nothing."""
    await cluster.slave("s1", Resources.parse("cpus(team):4;mem:4096"))
    await eventually(lambda: "s1" in cluster.master.books.slaves)
    await cluster.slave("s1", Resources.parse("cpus:4;mem:4096"))  # (again: restarted)
    await eventually(
        lambda: cluster.master.books.slaves["s1"].total == Resources.parse("cpus:4;mem:4096")
    )
    a = await cluster.framework("A")
    assert (await a.next_offer()).resources == Resources.parse("cpus:4;mem:4096")


async def test_a_slave_back_with_more_that_missed_a_reservation_keeps_it(
    cluster: Cluster,
) -> None:
    """Other amounts and a RESERVE it missed while away: its new --resources, with the
    master's reservation applied on them and sent to it again."""
    s1 = await reserved_two_cpus(cluster)
    more = Resources(cpus=8, mem=4 * GB)
    await s1.bus.publish(
        s1.to_master,
        Reregister(slave_id="s1", hostname="s1.local", resources=more, tasks=[]),
    )
    await s1.inbox.wait_until(lambda: len(s1.inbox.of(CheckpointResources)) > 1)
    assert s1.inbox.of(CheckpointResources)[-1].resources == Resources.parse(
        "cpus(team,framework):2"
    )
    assert cluster.master.books.slaves["s1"].total == Resources.parse(
        "cpus:6;cpus(team,framework):2;mem:4096"
    )
    assert cluster.master.allocator.total == more


async def test_an_unreachable_slave_back_without_a_partition_aware_task_has_it_gone() -> None:
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        await c.start_master(MasterConfig(allocation_interval=0.05, slave_timeout=0.5))
        a = await c.framework("A", capabilities=[FrameworkCapability.PARTITION_AWARE])
        s1 = await c.slave("s1", Resources(cpus=1, mem=GB))
        offer = await a.next_offer()
        await a.accept(offer, [a.task(offer, Resources(cpus=1), task_id="t1")])
        await s1.run_task()
        await a.update_for("t1", TaskState.UNREACHABLE)  # no heartbeats
        assert "t1" in c.master.books.frameworks[a.framework_id].unreachable
        await s1.bus.publish(
            s1.to_master,
            Reregister(slave_id="s1", hostname="s1.local", resources=s1.resources, tasks=[]),
        )
        gone = await a.update_for("t1", TaskState.GONE)
        assert (gone.reason, gone.source) == (Reason.RECONCILIATION, Source.MASTER)
        assert gone.uuid  # re-sent until acknowledged
        assert not c.master.books.frameworks[a.framework_id].unreachable
        books_balance(c.master)


async def test_a_failover_timeout_of_no_finite_length_is_refused(cluster: Cluster) -> None:
    """Infinity, NaN and 1e308 seconds are each refused with an Error naming the field: a
    framework registered with one held its tasks forever (NaN compares false with every
    deadline) and made the master's state no valid JSON."""
    a = await cluster.framework("A")
    for i, timeout in enumerate((math.inf, math.nan, 1e308)):
        body = {"name": f"eternal{i}", "inbox": a.inbox_id, "failover_timeout": timeout}
        await a.bus.publish_raw(a.to_master, encode_raw("Subscribe", a.bus.inbox, body))
    errors = await a.inbox.wait_count(Error, 3)
    assert {e.code for e in errors} == {"invalid"}
    assert sorted(e.message.removeprefix("invalid: Subscribe: ") for e in errors) == [
        "failover_timeout: Input should be a finite number",
        "failover_timeout: Input should be a finite number",
        "failover_timeout: Input should be less than or equal to 9200000000",
    ]
    assert list(cluster.master.books.frameworks) == [a.framework_id]
    json.loads(cluster.master.views.state(include_tasks=True).model_dump_json())  # (valid JSON)


async def test_without_allocate_on_free_what_a_task_frees_waits_for_the_next_round() -> None:
    """`--no-allocate-on-free`, as Mesos's allocator (MESOS-3078): a task's end asks for
    no round; what it freed is offered by the next allocation round, with whatever else
    ends before it (what lets a framework of big tasks gather room that single ends
    would give straight back, paper §7.1)."""
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        # (no round on the interval within the test: the one below is run by hand)
        await c.start_master(MasterConfig(allocation_interval=3600, allocate_on_free=False))
        rounds = c.master.offer_rounds
        a = await c.framework("A")
        s1 = await c.slave("s1", Resources(cpus=1, mem=GB))
        offer = await a.next_offer()
        task = a.task(offer, Resources(cpus=1, mem=GB), task_id="t")
        await a.accept(offer, [task])
        await s1.run_task()
        await s1.report(a.framework_id, "t", TaskState.FINISHED)
        await a.update_for("t", TaskState.FINISHED)  # (sent once its resources are free)
        await eventually(lambda: not rounds.requested)  # (any round asked for has run)
        assert not c.master.books.offers  # freed, and offered to nobody yet
        assert c.master.books.slaves["s1"].offers == set()
        rounds.run_one()  # the next allocation round
        again = await a.next_offer(after=1)
        assert again.slave_id == "s1"
        assert again.resources == Resources(cpus=1, mem=GB)


async def test_reconciling_a_task_answers_its_latest_health_verdict(cluster: Cluster) -> None:
    """As Mesos's reconciliation answers a task's latest status: its health check's
    verdict with it (review 78: a framework reconciling after its own failover learns
    whether its tasks are healthy without waiting for the verdict to change)."""
    s1 = await cluster.slave("s1", Resources(cpus=4, mem=GB))
    a = await cluster.framework("A")
    offer = await a.next_offer()
    await a.accept(offer, [a.task(offer, Resources(cpus=1, mem=32), task_id="t")], refuse=0)
    await s1.run_task()
    await a.update_for("t", TaskState.RUNNING)
    status = TaskStatus(task_id="t", state=TaskState.RUNNING, slave_id="s1", uuid=new_id(),
                        healthy=True)  # fmt: skip
    await s1.bus.publish(
        s1.to_master, StatusUpdate(framework_id=a.framework_id, slave_id="s1", status=status)
    )
    healthy = await a.update_for("t", TaskState.RUNNING, after=1)
    assert healthy.healthy is True
    seen = len(a.inbox.of(Update))
    await a.bus.publish(
        T.inbound("framework", "framework"),
        Reconcile(framework_id=a.framework_id, tasks=[ReconcileTask(task_id="t")]),
    )
    await a.inbox.wait_until(lambda: len(a.inbox.of(Update)) > seen)
    answer = a.inbox.of(Update)[-1].status
    assert answer.reason == Reason.RECONCILIATION
    assert answer.state == TaskState.RUNNING
    assert answer.healthy is True
