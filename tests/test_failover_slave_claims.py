"""What a slave may claim while a new leader waits for the fleet to come back (review 54).

After a failover the new leader knows the slaves of the registry and their principals,
and no task: each slave brings its own back as it re-registers. A task the master knows
on another slave is not a slave's to claim (`slave.claimed_foreign_task`), but in the
failover window nobody's task is known yet, and the first slave to name it has it. And
what a slave brings back of a framework removed before the failover is not kept.

In process, on the memory transport with the credentials store's ACL: two slave
principals (one of them a compromised host), alice's framework, and a new leader on the
same registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.wire.messages import (
    Error,
    KillTask,
    Offer,
    Offers,
    RunningTask,
    RunTask,
    ShutdownFramework,
    Subscribe,
    TaskInfo,
    TaskState,
    Teardown,
    Update,
)
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics
from slave.slave import Slave, SlaveConfig

from harness.failover import SLAVE, Failover, failover_cluster, reregister
from harness.fakes import FakeFramework, FakeSlave
from harness.helpers import eventually, open_transport

T = Topics("claims")
PRINCIPALS = [
    ("master", "master"),
    ("slave-a", "slave"),
    ("slave-b", "slave"),
    ("alice", "framework"),
]
TASK = Resources(cpus=1, mem=64)
pytestmark = pytest.mark.timeout(60)


async def alice_runs_t0_on_sa(
    c: Failover,
) -> tuple[FakeSlave, FakeSlave, FakeFramework, str, RunTask]:
    """slave-a's host sa runs alice's t0 (she has heard it RUNNING); slave-b's host sb is
    registered beside it. Returns sa, sb, alice, her framework id and t0's launch."""
    sa = await c.slave("slave-a", "sa")
    alice = await c.framework("alice")
    fid = (await alice.subscribe("a", role="alice", failover_timeout=60)).framework_id
    offer = await offer_on(alice, "sa")
    await alice.accept(offer, [alice.task(offer, TASK, "t0")])
    run = await sa.run_task()
    sb = await c.slave("slave-b", "sb")
    await alice.update_for("t0", TaskState.RUNNING)
    return sa, sb, alice, fid, run


async def offer_on(fw: FakeFramework, slave_id: str) -> Offer:
    def found() -> Offer | None:
        offers = (o for batch in fw.inbox.of(Offers) for o in batch.offers)
        return next((o for o in offers if o.slave_id == slave_id), None)

    await fw.inbox.wait_until(lambda: found() is not None)
    offer = found()
    assert offer is not None
    return offer


async def test_a_slave_cannot_take_another_slaves_task_in_the_failover_window(
    tmp_path: Path,
) -> None:
    """alice runs t0 on slave-a's host. The leader fails over; slave-b's host (one
    compromised slave principal) re-registers first, naming alice's t0 as its own. When
    slave-a's host comes back with the t0 it really runs, the master must not book t0 on
    the compromised host and leave what it uses on slave-a's host free to offer: the
    task's resources would be given twice (a launch on them the slave refuses, or runs
    over its limits), and t0's updates would be heard from the wrong slave."""
    async with failover_cluster(tmp_path, PRINCIPALS, T) as c:
        sa, sb, alice, fid, run = await alice_runs_t0_on_sa(c)
        await eventually(lambda: c.held("sa") == TASK)

        await c.fail_over()
        # the compromised host speaks first: alice's t0 is "its" task
        claimed = TaskInfo(
            task_id="t0", name="t0", slave_id="sb", resources=TASK, command=run.task.command
        )
        await reregister(
            sb, [RunningTask(framework_id=fid, task=claimed, state=TaskState.RUNNING)], {}
        )
        await eventually(lambda: "sb" in c.master.books.slaves)
        await reregister(sa, [running(run)], {fid: "alice"})
        await eventually(lambda: "sa" in c.master.books.slaves)
        alice.inbox.messages.clear()
        await alice.subscribe("a", role="alice", framework_id=fid, failover_timeout=60)
        await eventually(lambda: fid in c.master.books.frameworks)

        # what slave-a's host runs is held there, not offered to anyone again
        assert c.held("sa") == TASK, f"t0 uses {TASK} of sa; the master holds {c.held('sa')}"
        task = c.master.books.frameworks[fid].tasks.get("t0")
        assert task is not None
        assert task.slave_id == "sa", "t0 is booked on the host that claimed it first"
        # what sb says runs there, with no proof it was launched there, is held by nobody
        assert c.held("sb") == TASK


async def test_a_slave_cannot_end_another_slaves_task_in_the_failover_window(
    tmp_path: Path,
) -> None:
    """alice runs t0 on slave-a's host; the leader fails over and alice re-subscribes. The
    compromised slave-b host, registered again, sends a status update saying alice's t0
    FINISHED on it. The master knows no task yet, and forwards an update of one it does
    not know (as Mesos does after a failover): alice hears t0 ended, and when slave-a's
    host comes back with t0 the master kills it there as a task that already ended. A
    slave speaks for its own tasks only: an update of a task it did not bring back (nor
    said is ending) is not its to send."""
    async with failover_cluster(tmp_path, PRINCIPALS, T) as c:
        sa, sb, alice, fid, run = await alice_runs_t0_on_sa(c)

        await c.fail_over()
        alice.inbox.messages.clear()
        await alice.subscribe("a", role="alice", framework_id=fid, failover_timeout=60)
        await reregister(sb, [], {})
        await eventually(lambda: "sb" in c.master.books.slaves)
        await sb.report(fid, "t0", TaskState.FINISHED)  # "alice's t0 ended here"
        await reregister(sa, [running(run)], {fid: "alice"})
        await eventually(lambda: "sa" in c.master.books.slaves)

        await c.rounds_pass()
        heard = [(u.status.task_id, u.status.state) for u in alice.inbox.of(Update)]
        assert ("t0", TaskState.FINISHED) not in heard, "alice was told t0 ended on sb"
        assert not sa.inbox.of(KillTask), "t0 was killed on the host that runs it"
        task = c.master.books.frameworks[fid].tasks.get("t0")
        assert task is not None
        assert task.slave_id == "sa"


def running(run: RunTask) -> RunningTask:
    return RunningTask(
        framework_id=run.framework_id, task=run.task, state=TaskState.RUNNING, proof=run.proof
    )


async def test_a_slave_restarted_brings_its_tasks_back_to_a_new_leader_with_their_proofs(
    tmp_path: Path,
) -> None:
    """The proof a launch gives its task is kept in the slave's journal: a slave restarted
    on its work dir re-registers with a new leader, and its task is booked as its
    framework's again (not held by nobody as a claim without proof)."""
    async with failover_cluster(tmp_path, PRINCIPALS, T) as c:

        async def real_slave() -> Slave:
            bus = await open_transport(
                c.stack, c.broker.connector("slave-a"), "ra", inbox=T.slave("slave-a", "ra")
            )
            config = SlaveConfig(
                slave_id="ra",
                hostname="ra.local",
                resources=SLAVE,
                work_dir=tmp_path / "ra",
                simulated_tasks=True,
                cluster=T.cluster,
            )
            slave = Slave(bus, T, config)
            await slave.start()
            c.stack.push_async_callback(slave.stop)
            return slave

        first = await real_slave()
        await eventually(lambda: "ra" in c.master.books.slaves)
        alice = await c.framework("alice")
        fid = (await alice.subscribe("a", role="alice", failover_timeout=60)).framework_id
        offer = await offer_on(alice, "ra")
        task = alice.task(offer, TASK, "t0").model_copy(
            update={"data": json.dumps({"duration": 600}).encode()}
        )
        await alice.accept(offer, [task])
        await alice.update_for("t0", TaskState.RUNNING)

        await first.stop()
        await first.bus.close()
        await c.fail_over()
        await real_slave()  # on the same work dir: its tasks recovered from its journal
        await eventually(lambda: "ra" in c.master.books.slaves)
        await alice.subscribe("a", role="alice", framework_id=fid, failover_timeout=60)
        await eventually(lambda: "t0" in c.master.books.frameworks[fid].tasks)
        assert c.master.books.frameworks[fid].tasks["t0"].slave_id == "ra"
        assert not c.master.books.orphans.of(fid)
        assert c.held("ra") == TASK


async def test_a_framework_torn_down_stays_removed_across_a_failover(tmp_path: Path) -> None:
    """alice tears her framework down while slave-a's host is away (it misses the
    shutdown), and the leader fails over. The new leader knows she was removed, as the old
    one did: her framework id is refused as removed, and when slave-a's host comes back
    naming t0 it is told to shut her framework down and nothing is held for t0 (before,
    t0 was held by nobody for ever, and her id subscribed again as a new framework)."""
    async with failover_cluster(tmp_path, PRINCIPALS, T) as c:
        sa, _, alice, fid, run = await alice_runs_t0_on_sa(c)
        await alice.bus.publish(alice.to_master, Teardown(framework_id=fid))
        await eventually(lambda: fid in c.master.registry.removed)

        await c.fail_over()
        shutdowns = len(sa.inbox.of(ShutdownFramework))
        await reregister(sa, [running(run)], {fid: "alice"})
        told = await sa.inbox.wait_count(ShutdownFramework, shutdowns + 1)
        assert told[-1].framework_id == fid
        # (held as dying until the slave says its tasks have ended: the fake, at once)
        await eventually(lambda: c.held("sa") == Resources())
        assert not c.master.books.orphans

        errors = len(alice.inbox.of(Error))
        again = Subscribe(name="a", role="alice", inbox="in", framework_id=fid)
        await alice.bus.publish(alice.to_master, again)
        error = (await alice.inbox.wait_count(Error, errors + 1))[errors]
        assert error.code == "framework-removed"
        assert fid not in c.master.books.frameworks
