"""Review 57: a framework removed (torn down by its own scheduler, by an operator, or past
its failover timeout) has everything it held given back at once
(`Removals.remove_framework` -> `Allocator.remove_framework`), while its slaves are only
told to shut it down: each task there is SIGTERMed and runs on for its kill grace (its own
kill policy, up to the slave's --max-kill-grace, 60 s by default; a task that traps
SIGTERM uses all of it). The room is offered again while they still use it.

So a tenant that tears down its framework and subscribes again at once is offered its
share a second time beside its tasks still running: every teardown and subscribe doubles
what it really uses for up to a minute, and the tasks of whoever is offered that room run
on a slave that is already full (a memory overcommit is the kernel's OOM killer's to
settle, on any tenant's task there). A preemption holds a victim's room until its task has
ended (`hold_claim`); a teardown does not.

In process, on the memory transport (the fixtures of tests/test_framework_ids.py); the
slave is a bare protocol speaker that says nothing after the ShutdownFramework, as a real
slave says nothing while the tasks are in their grace."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_framework_ids import cluster

from master import dying
from protocol.wire.messages import (
    FrameworkShutDown,
    ShutdownFramework,
    StatusUpdate,
    TaskState,
    TaskStatus,
    Teardown,
)
from protocol.wire.resources import Resources
from protocol.wire.values import KillPolicy

from harness.helpers import eventually

pytestmark = pytest.mark.timeout(60)
TASK = Resources(cpus=1, mem=256)  # the slave: cpus 4, mem 1024


async def test_a_torn_down_frameworks_tasks_in_their_grace_are_not_offered_again(
    tmp_path: Path,
) -> None:
    """alice runs 3 tasks of 1 CPU and 256 MB that trap SIGTERM (a 60 s grace) on a slave
    of 4 CPUs and 1,024 MB, tears her framework down, and subscribes a new one at once.
    The slave has been told to shut the old one down, and said nothing since (the tasks are
    in their grace). Her new framework's first offer must not hold the room they still
    use: it was the whole slave, 4 CPUs and 1,024 MB."""
    async with cluster(tmp_path) as c:
        alice = await c.framework("alice")
        fid = (await alice.subscribe("a", role="alice")).framework_id
        offer = await alice.next_offer()
        tasks = [
            alice.task(offer, TASK, f"t{i}").model_copy(
                update={"kill_policy": KillPolicy(grace_period=60)}
            )
            for i in range(3)
        ]
        await alice.accept(offer, tasks)
        for _ in tasks:
            await c.slave.run_task()
        await eventually(lambda: c.running(fid) == 3)
        assert c.held("sa") == TASK.scaled(3)
        c.slave.ends_shut_down_frameworks = False  # (its tasks in their grace: not ended)

        shutdowns = len(c.slave.inbox.of(ShutdownFramework))
        await alice.bus.publish(alice.to_master, Teardown(framework_id=fid))
        told = await c.slave.inbox.wait_count(ShutdownFramework, shutdowns + 1)
        assert told[-1].framework_id == fid  # (SIGTERM there; 60 s of grace begin)

        again = await c.framework("alice", inbox="again")
        await again.subscribe("a2", role="alice")
        offered = (await again.next_offer()).resources
        still_used = TASK.scaled(3)
        assert (offered + still_used).fits(c.slave.resources), (
            f"offered {offered} of a slave of {c.slave.resources} while the torn-down "
            f"framework's tasks, in their grace, still use {still_used} of it"
        )

        # the slave says they have ended: their room is offered again
        await c.slave.bus.publish(
            c.slave.to_master, FrameworkShutDown(framework_id=fid, slave_id="sa")
        )
        await eventually(lambda: c.held("sa") == Resources())


async def test_a_slave_that_never_says_its_tasks_ended_is_believed_after_a_while(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slave from before FrameworkShutDown (or whose word is lost): the room its torn-down
    tasks used is free again after HELD_AT_MOST (75 s; 0.5 here), not held for ever."""
    monkeypatch.setattr(dying, "HELD_AT_MOST", 0.5)
    async with cluster(tmp_path) as c:
        alice = await c.framework("alice")
        fid = (await alice.subscribe("a", role="alice")).framework_id
        offer = await alice.next_offer()
        await alice.accept(offer, [alice.task(offer, TASK, "t0")])
        await c.slave.run_task()
        await eventually(lambda: c.held("sa") == TASK)
        c.slave.ends_shut_down_frameworks = False
        await alice.bus.publish(alice.to_master, Teardown(framework_id=fid))
        await eventually(lambda: fid not in c.master.books.frameworks)
        assert c.held("sa") == TASK  # (held by nobody while it dies)
        await eventually(lambda: c.held("sa") == Resources())


async def test_a_task_that_ended_unacknowledged_is_not_held_again_at_the_teardown(
    tmp_path: Path,
) -> None:
    """Of alice's 2 tasks one has FINISHED on its slave (her framework has still to hear
    it: it stays in her books, its resources freed already); she tears down. Only the
    live one is held while it dies: held twice, the slave's free went below zero and
    offers of negative cpus went out (found by benchmarks.e2e, whose frameworks leave
    without acknowledging)."""
    async with cluster(tmp_path) as c:
        alice = await c.framework("alice")
        fid = (await alice.subscribe("a", role="alice")).framework_id
        offer = await alice.next_offer()
        await alice.accept(offer, [alice.task(offer, TASK, f"t{i}") for i in range(2)])
        for _ in range(2):
            await c.slave.run_task()
        # its RUNNING, not yet acknowledged, says it has FINISHED since (`latest_state`)
        running = TaskStatus(task_id="t0", state=TaskState.RUNNING, slave_id="sa", uuid="u0")
        update = StatusUpdate(
            framework_id=fid, slave_id="sa", status=running, latest_state=TaskState.FINISHED
        )
        await c.slave.bus.publish(c.slave.to_master, update)
        await eventually(lambda: c.held("sa") == TASK)
        assert "t0" in c.master.books.frameworks[fid].tasks  # (freed, and in her books)
        c.slave.ends_shut_down_frameworks = False
        await alice.bus.publish(alice.to_master, Teardown(framework_id=fid))
        await eventually(lambda: fid not in c.master.books.frameworks)
        assert c.held("sa") == TASK
        assert c.master.allocator.free("sa") == c.slave.resources - TASK
