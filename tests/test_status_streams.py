"""A task's status updates as one stream (Mesos's status update manager): the slave has only
a task's oldest unacknowledged update in flight and sends the next when it is acknowledged,
each carrying the task's latest state; the master frees resources on a terminal latest
state and drops what its framework heard already. The slave's side is driven directly;
the master's with bare protocol fakes, and the whole loop with the SDK, in process on the
in-memory transport."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from pathlib import Path
from typing import Any

from frameworks import Resources, SchedulerDriver, TaskState, TaskStatus, build_task
from master.master import MasterConfig
from protocol import group_commit
from protocol.journal import Journal
from protocol.wire.messages import (
    Reason,
    Reconcile,
    ReconcileTask,
    StatusAck,
    StatusUpdate,
    Update,
    new_id,
)
from slave.updates import OwedUpdates

from harness.fakes import FakeFramework, FakeSlave
from harness.helpers import Recorder, books_balance, in_process_cluster
from harness.master import GB, Cluster
from harness.master import cluster as cluster  # (the fixture: a master in process)

FW = "fw-1"


class Posts:
    """The slave's bus, reduced to what it posts to the master."""

    def __init__(self) -> None:
        self.sent: list[StatusUpdate] = []

    def post(self, topic: str, message: Any, **_kw: object) -> None:
        self.sent.append(message)

    def took(self) -> list[tuple[TaskState, TaskState | None]]:
        """(state, latest state) of what was posted since the last look."""
        sent, self.sent = self.sent, []
        return [(u.status.state, u.latest_state) for u in sent]


def update(task_id: str, state: TaskState) -> StatusUpdate:
    status = TaskStatus(task_id=task_id, state=state, slave_id="s1", uuid=new_id())
    return StatusUpdate(framework_id=FW, slave_id="s1", status=status)


def owed(bus: Posts, path: Path) -> OwedUpdates:
    return OwedUpdates(bus, "to-master", Journal(path), resend_after=1.0)  # type: ignore[arg-type]


S, R, F = TaskState.STARTING, TaskState.RUNNING, TaskState.FINISHED


async def test_only_the_head_is_in_flight_retried_and_the_next_goes_on_its_ack(
    tmp_path: Path,
) -> None:
    bus = Posts()
    updates = owed(bus, tmp_path / "updates.journal")
    starting, running, finished = update("t", S), update("t", R), update("t", F)
    await updates.send(starting)
    assert bus.took() == [(S, S)]
    await updates.send(running)
    assert bus.took() == []  # it waits behind STARTING
    await updates.send(finished)
    # the task's end rides on the head's next re-send (unless STARTING's acknowledgement
    # comes first): the master frees its resources then
    assert bus.took() == []
    other = update("t2", R)
    await updates.send(other)
    assert bus.took() == [(R, R)]  # another task's stream does not wait

    updates.resend_due(float("inf"))
    assert sorted(bus.took()) == sorted([(S, F), (R, R)])  # the heads alone are retried
    updates.acknowledged(starting.status.uuid or "")
    assert bus.took() == [(R, F)]  # the next goes at once, no timer
    updates.acknowledged(starting.status.uuid or "")  # a duplicate acknowledgement
    assert bus.took() == []
    updates.acknowledged(running.status.uuid or "")
    assert bus.took() == [(F, F)]
    updates.acknowledged(finished.status.uuid or "")
    updates.acknowledged(other.status.uuid or "")
    assert len(updates) == 0
    assert bus.took() == []
    await updates.close()


def gated_disk(monkeypatch: Any) -> threading.Event:
    """The disk thread's writes wait until the event returned is set."""
    disk = threading.Event()
    write_and_sync = group_commit.write_and_sync

    def gated(writes: list[group_commit.Write]) -> None:
        disk.wait(30)
        write_and_sync(writes)

    monkeypatch.setattr(group_commit, "write_and_sync", gated)
    return disk


async def test_a_quiet_slaves_update_goes_as_it_is_written_and_is_acknowledged_on_disk(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """With nothing else owed, an update is sent while its write is on its way to the disk
    (the sync overlaps its trip to the framework); an acknowledgement that comes before it
    is on disk is taken once it is: until then the update stays owed, and the next of its
    stream waits. With others owed (a busy slave), a new task's update waits for its write,
    and leaves with the others of that write."""
    disk = gated_disk(monkeypatch)
    bus = Posts()
    updates = owed(bus, tmp_path / "updates.journal")
    running, finished = update("t", R), update("t", F)
    updates.owe(running)
    updates.owe(finished)
    assert bus.took() == [(R, R)]  # sent at once, not on disk yet
    other = update("t2", R)
    updates.owe(other)  # (something is owed now: it waits for its write)
    updates.acknowledged(running.status.uuid or "")
    await asyncio.sleep(0.05)  # (the disk has not answered: nothing may be taken)
    assert bus.took() == []
    assert updates.in_flight() == [running.status.uuid, other.status.uuid]
    disk.set()
    await updates.journal.synced()
    # on disk: the acknowledgement taken (the next goes), and the other sent
    assert sorted(bus.took()) == sorted([(F, F), (R, R)])
    assert updates.in_flight() == [finished.status.uuid, other.status.uuid]
    await updates.close()


async def test_a_quiet_slave_sends_a_tasks_end_only_once_it_is_on_disk(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A task's end drops its checkpoint in the same write: sent before that write is on
    disk, a slave killed meanwhile would find the task again on restart and report it
    ended a second time. So even a quiet slave sends an end only once it is written."""
    disk = gated_disk(monkeypatch)
    disk.set()
    bus = Posts()
    updates = owed(bus, tmp_path / "updates.journal")
    running, finished = update("t", R), update("t", F)
    updates.owe(running)
    updates.acknowledged(running.status.uuid or "")
    await updates.journal.synced()
    assert bus.took() == [(R, R)]
    assert updates.in_flight() == []  # quiet again
    disk.clear()
    updates.owe(finished)
    await asyncio.sleep(0.05)  # (the disk has not answered: the end may not have gone)
    assert bus.took() == []
    disk.set()
    await updates.journal.synced()
    assert bus.took() == [(F, F)]
    await updates.close()


async def test_a_tasks_end_behind_a_backed_off_head_goes_within_resend_after(
    tmp_path: Path,
) -> None:
    """A head its framework has not acknowledged for a while is re-sent ever later (up to
    30 s); the task's end queued behind it brings its next re-send within `resend_after`
    (1 s here), carrying the end as its latest state."""
    bus = Posts()
    updates = owed(bus, tmp_path / "updates.journal")
    running, finished = update("t", R), update("t", F)
    await updates.send(running)
    for _ in range(6):  # unacknowledged: its backoff grows past resend_after
        updates.resend_due(float("inf"))
    bus.took()
    await updates.send(finished)
    assert bus.took() == []
    updates.resend_due(time.monotonic() + 1.0 + 0.01)
    assert bus.took() == [(R, F)]
    await updates.close()


async def test_an_update_written_as_its_framework_is_forgotten_is_not_owed(
    tmp_path: Path,
) -> None:
    """The framework is forgotten (shut down) while its update is being written: the
    update is not left as a stream's head that nothing will ever acknowledge."""
    bus = Posts()
    updates = owed(bus, tmp_path / "updates.journal")
    running = update("t", R)
    written, go_on = asyncio.Event(), asyncio.Event()
    wait = updates.journal._wait

    async def slow_disk() -> None:  # the put waits here, for its record to reach the disk
        written.set()
        await go_on.wait()
        await wait()

    updates.journal._wait = slow_disk  # type: ignore[method-assign]
    sending = asyncio.create_task(updates.send(running))
    await written.wait()
    updates.journal._wait = wait  # type: ignore[method-assign]
    await updates.forget_framework(FW)
    go_on.set()
    await sending
    assert updates.in_flight() == []
    assert len(updates) == 0
    await updates.close()


async def test_a_restarted_slave_keeps_each_stream_in_order(tmp_path: Path) -> None:
    path = tmp_path / "updates.journal"
    first = owed(Posts(), path)
    sent = [update("t", state) for state in (S, R, F)]
    for u in sent:
        await first.send(u)
    await first.close()  # the slave stops (or dies: every put was synced)

    bus = Posts()
    again = owed(bus, path)
    assert len(again) == 3
    assert again.ending()[0].task_id == "t"  # its end is still owed
    again.send_all_soon()
    again.resend_due(float("inf"))
    assert bus.took() == [(S, F)]  # the head alone, with the task's latest state
    for before, after in itertools.pairwise(sent):
        again.acknowledged(before.status.uuid or "")
        assert [u.status.uuid for u in bus.sent] == [after.status.uuid]
        bus.took()
    await again.close()


async def test_a_stream_owes_its_head_its_latest_state_and_its_end_never_more(
    tmp_path: Path,
) -> None:
    """An executor that reports RUNNING a thousand times while its framework does not
    acknowledge costs the slave three updates, not a thousand: the one in flight, the
    latest behind it (each newer one takes its place), and the task's end, never
    dropped. The framework hears the one in flight, the latest, and the end."""
    path = tmp_path / "updates.journal"
    bus = Posts()
    updates = owed(bus, path)
    head = update("t", S)
    await updates.send(head)
    runs = [update("t", R) for _ in range(1000)]
    for u in runs:
        await updates.send(u)
    end = update("t", F)
    await updates.send(end)
    assert len(updates) == 3
    await updates.close()
    again = owed(bus, path)  # (and so a restart finds it)
    assert len(again) == 3
    bus.took()
    again.send_all_soon()
    again.resend_due(float("inf"))
    heard = [bus.sent[-1].status.uuid]
    for _ in range(2):
        again.acknowledged(heard[-1] or "")
        heard.append(bus.sent[-1].status.uuid)
    assert heard == [head.status.uuid, runs[-1].status.uuid, end.status.uuid]
    await again.close()
    assert path.stat().st_size < 64 * 1024  # (what was replaced is gone from the file too)


async def launched(cluster: Cluster) -> tuple[FakeFramework, FakeSlave, str]:
    """A framework with a task on all of a fake slave's resources."""
    fw = await cluster.framework("A")
    slave = await cluster.slave("s1", Resources(cpus=2, mem=GB))
    offer = await fw.next_offer()
    await fw.accept(offer, [fw.task(offer, offer.resources, task_id="t")], refuse=0)
    run = await slave.run_task()  # (reported RUNNING, without a latest state: an old slave)
    await fw.update_for("t", TaskState.RUNNING)
    return fw, slave, run.task.task_id


async def report(
    slave: FakeSlave, state: TaskState, latest: TaskState | None = None, uuid: str = ""
) -> str:
    uuid = uuid or new_id()
    status = TaskStatus(task_id="t", state=state, slave_id=slave.slave_id, uuid=uuid)
    framework_id = next(iter(slave.runs())).framework_id
    await slave.bus.publish(
        slave.to_master,
        StatusUpdate(
            framework_id=framework_id, slave_id=slave.slave_id, status=status, latest_state=latest
        ),
    )
    return uuid


async def heard_everything(fw: FakeFramework, task_id: str) -> None:
    """Whatever the master sent the framework before now has arrived: a reconciliation's
    answer comes after it."""
    before = len(fw.inbox.of(Update))
    await fw.bus.publish(
        fw.to_master,
        Reconcile(framework_id=fw.framework_id, tasks=[ReconcileTask(task_id=task_id)]),
    )
    await fw.inbox.wait_for(
        Update,
        lambda u: u.status.reason == Reason.RECONCILIATION and len(fw.inbox.of(Update)) > before,
    )


async def test_the_master_frees_resources_on_a_terminal_latest_state(cluster: Cluster) -> None:
    fw, slave, task_id = await launched(cluster)
    master = cluster.master
    offers = fw.offer_count()
    # KILLING is the head; the task has ended on its slave meanwhile
    killing = await report(slave, TaskState.KILLING, latest=TaskState.FINISHED)
    offer = await fw.next_offer(after=offers, timeout=3)  # freed before any acknowledgement
    assert offer.resources == Resources(cpus=2, mem=GB)
    await fw.update_for(task_id, TaskState.KILLING)
    held = master.books.frameworks[fw.framework_id].tasks[task_id]
    assert held.state == TaskState.KILLING  # what its framework has heard, in order
    assert held.terminal
    assert master.books.frameworks[fw.framework_id].running_tasks() == 0
    books_balance(master)

    await fw.acknowledge(
        TaskStatus(task_id=task_id, state=TaskState.KILLING, slave_id="s1", uuid=killing)
    )
    await slave.inbox.wait_for(StatusAck, lambda a: a.uuid == killing)
    await report(slave, TaskState.FINISHED, latest=TaskState.FINISHED)
    await fw.update_for(task_id, TaskState.FINISHED)
    assert task_id not in master.books.frameworks[fw.framework_id].tasks
    assert master.outbox.tasks_ended["TASK_FINISHED"] == 1  # its resources came back once
    books_balance(master)


async def test_a_duplicate_or_stale_update_is_acknowledged_and_dropped(cluster: Cluster) -> None:
    fw, slave, task_id = await launched(cluster)
    [running] = [u.status for u in fw.inbox.of(Update) if u.status.task_id == task_id]
    await fw.acknowledge(running)
    await slave.inbox.wait_for(StatusAck, lambda a: a.uuid == running.uuid)

    # its re-send crossed the acknowledgement: acknowledged again, not heard again
    assert running.uuid is not None
    await report(slave, TaskState.RUNNING, uuid=running.uuid)
    await slave.inbox.wait_count(StatusAck, 2)
    # a STARTING that comes after RUNNING (an older slave's late re-send): the same
    stale = await report(slave, TaskState.STARTING)
    await slave.inbox.wait_for(StatusAck, lambda a: a.uuid == stale)
    await heard_everything(fw, task_id)
    heard = [u.status.state for u in fw.inbox.of(Update) if u.status.reason is None]
    assert heard == [TaskState.RUNNING]
    assert cluster.master.books.frameworks[fw.framework_id].tasks[task_id].state == R


async def test_an_update_after_the_masters_own_killing_mark_is_heard(cluster: Cluster) -> None:
    """The master marks a task KILLING when it sends a kill (a preemption's) and tells
    nobody: an update its slave sends meanwhile (RUNNING again, say a health change, or
    the task's first RUNNING if it was doomed while STARTING) is still news to its
    framework, not a stale one."""
    fw, slave, task_id = await launched(cluster)
    [running] = [u.status for u in fw.inbox.of(Update) if u.status.task_id == task_id]
    await fw.acknowledge(running)
    task = cluster.master.books.frameworks[fw.framework_id].tasks[task_id]
    task.state = TaskState.KILLING  # (as master.preemptor does at a kill's deadline)
    again = await report(slave, TaskState.RUNNING)
    await fw.inbox.wait_for(Update, lambda u: u.status.uuid == again)


class SlowAcker(Recorder):
    """Acknowledges an update only once the master has sent it twice (a busy framework)."""

    async def status_update(self, driver: SchedulerDriver, status: TaskStatus) -> None:
        await super().status_update(driver, status)
        if sum(s.uuid == status.uuid for s in self.statuses) == 2:
            driver.acknowledge_status_update(status)


async def test_a_slow_acknowledgement_never_lets_starting_arrive_after_running(
    tmp_path: Path,
) -> None:
    config = MasterConfig(allocation_interval=0.05, status_retry=0.05)
    async with in_process_cluster("streams", tmp_path, config, slaves=1) as cluster:
        rec = SlowAcker()
        driver = SchedulerDriver(
            rec,
            name="slow",
            broker=cluster.connect,
            cluster="streams",
            implicit_acknowledgements=False,
        )
        await driver.start()
        try:
            await rec.wait(lambda: rec.offers)
            offer = rec.offers[0]
            task = build_task(offer, "t", Resources(cpus=1, mem=64), command="sleep 0.2")
            await driver.launch_tasks([offer.offer_id], [task])
            await rec.wait(lambda: rec.states(task.task_id).count(TaskState.FINISHED) == 2)
        finally:
            driver.stop()
            await driver.join()
    states = rec.states(task.task_id)
    order = [S, R, F]
    assert sorted(states, key=order.index) == states  # never back to an earlier state
    assert set(states) == set(order)
