"""A task group outlives its slave's restart: the slave (a real process, SIGKILLed and
started again on its work dir) brings its group's tasks back in their group and under
their executor, so that a task failing after the restart still has its siblings killed,
and the executor still ends, its resources given back, with its last task. And its
master's restart: the slave re-registers with the group's executor, whose resources the
new master does not offer while the group runs.

Mesos: the default executor is a process of its own that an agent restart does not
touch; it goes on killing a failed task's group and ends with its last task. drfmesos's
slave plays that executor, so it keeps what it needs of each group with the task.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from master.master import MasterConfig
from protocol.journal import Journal
from protocol.tooling.brokers import MosquittoBroker
from protocol.transport.memory import MemoryBroker
from protocol.wire.messages import (
    Accept,
    CommandInfo,
    Decline,
    Failure,
    Filters,
    Kill,
    Offer,
    Offers,
    TaskGroup,
    TaskInfo,
    TaskState,
    Update,
)
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics
from slave.paths import task_sandbox

from harness.fakes import FakeFramework
from harness.groups import EXECUTOR, TASK
from harness.helpers import eventually, open_transport, start_master, start_simulated_slave
from harness.slave import restartable_slave

# runs until the test makes a file in its sandbox, then fails
FAILS_WHEN_TOLD = "while [ ! -e go ]; do sleep 0.05; done; exit 3"


async def test_a_group_is_kept_across_a_slave_restart_and_still_goes_down_together(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    async with restartable_slave(mosquitto, tmp_path) as slave:
        fw = await slave.rig.framework()
        await slave.start()
        offer = await fw.next_offer(timeout=60)
        sid = offer.slave_id

        def task(task_id: str, command: str) -> TaskInfo:
            return TaskInfo(
                task_id=task_id,
                slave_id=sid,
                resources=TASK,
                command=CommandInfo(value=command),
            )

        await run_group(fw, offer, [task("web", "sleep 300"), task("job", FAILS_WHEN_TOLD)])
        master = slave.rig.master
        booked = master.books.frameworks[fw.framework_id]
        assert booked.executors == {(sid, "pod"): EXECUTOR}

        await slave.crash()
        await slave.start()
        await eventually(lambda: sid in master.books.slaves, timeout=60)
        # the job fails after the restart: the restarted slave kills its sibling
        sandbox = task_sandbox(tmp_path / "slave", fw.framework_id, "job")
        (sandbox / "go").touch()

        def ended(task_id: str, state: TaskState) -> Update:
            return next(
                u
                for u in fw.inbox.of(Update)
                if (u.status.task_id, u.status.state) == (task_id, state)
            )

        # (each task's updates are a stream of their own: which the framework hears
        # first is not promised, as in Mesos; a loaded run heard web's KILLED first)
        await fw.inbox.wait_until(
            lambda: fw.heard("web", TaskState.KILLED) and fw.heard("job", TaskState.FAILED),
            timeout=60,
        )
        assert ended("job", TaskState.FAILED).status.executor_id == "pod"
        killed = ended("web", TaskState.KILLED).status
        assert killed.message == "killed: task job of its group ended TASK_FAILED"
        assert killed.executor_id == "pod"
        # its executor ended with them: the framework hears it, the master frees it
        failure = await fw.inbox.wait_for(Failure, timeout=60)
        assert (failure.executor_id, failure.slave_id) == ("pod", sid)
        assert booked.executors == {}


async def test_a_group_none_of_whose_tasks_a_restarted_slave_restores_ends_its_executor(
    tmp_path: Path,
) -> None:
    """Each task's journal record no longer makes a task (a damaged one): each is LOST,
    and with the last of them the executor ends. Before,
    the executor rejoined from the records stayed with no task: its resources held on
    the slave, and named to every master it re-registered with, for ever.

    In process: a master, the slave (simulated tasks) on a work dir whose journal holds
    the group, and a bare framework for the master's offers of the slave."""
    work = tmp_path / "s1"
    work.mkdir()
    journal = Journal(work / "tasks.journal")
    kept = {"executor_id": "pod", "resources": dict(EXECUTOR.millis), "tasks": ["a", "b"]}
    for task_id in ("a", "b"):
        broken = {"task_id": task_id}  # (no slave, no resources, no command)
        record = {"framework_id": "fw-away", "task": broken, "state": "TASK_RUNNING"}
        await journal.put(f"fw-away/{task_id}", {**record, "group": kept})
    await journal.close()
    topics = Topics("grouprecovery")
    whole = Resources(cpus=2, mem=512)
    connect = MemoryBroker().connector(None)
    async with contextlib.AsyncExitStack() as stack:
        config = MasterConfig(allocation_interval=0.05)
        master = await start_master(stack, connect, topics, config)
        slave = await start_simulated_slave(stack, connect, topics, work, whole)
        await slave.registered.wait()
        assert slave.groups.executors == {}
        assert slave.free() == whole

        fw_inbox = topics.framework("framework", "fw")
        fw_bus = await open_transport(stack, connect, "fw", inbox=fw_inbox)
        fw = FakeFramework(fw_bus, topics, "fw")
        await fw_bus.subscribe(fw_inbox, fw.inbox)
        await fw.subscribe("fw")
        offer = (await fw.inbox.wait_for(Offers, lambda o: bool(o.offers), 20)).offers[0]
        assert offer.resources == whole
        assert not master.books.orphans


async def test_a_restarted_master_learns_a_running_groups_executor_from_its_slave_process(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    """A master restarted without its registry (the rig's keeps none) while a group
    runs on a slave process: the slave re-registers with the group's executor, so the
    new master's offers of it leave out the executor's resources until the group's last
    task ends, then hold them again."""
    async with restartable_slave(mosquitto, tmp_path) as slave:
        fw = await slave.rig.framework()
        await slave.start()
        offer = await fw.next_offer(timeout=60)
        sid = offer.slave_id

        def task(task_id: str) -> TaskInfo:
            command = CommandInfo(value="sleep 300")
            return TaskInfo(task_id=task_id, slave_id=sid, resources=TASK, command=command)

        await run_group(fw, offer, [task("web"), task("db")])
        old = slave.rig.master
        await old.stop()
        await old.bus.close()
        master = await slave.rig.start_master()
        await eventually(lambda: sid in master.books.slaves, timeout=60)
        total = master.books.slaves[sid].total
        seen = len(fw.inbox.of(Offers))
        await fw.subscribe("fw", framework_id=fw.framework_id, failover_timeout=60)

        def offered(where: Callable[[Offer], bool]) -> Offer | None:
            outstanding = master.books.offers
            return next(
                (
                    o
                    for batch in fw.inbox.of(Offers)[seen:]
                    for o in batch.offers
                    if o.offer_id in outstanding and where(o)
                ),
                None,
            )

        await fw.inbox.wait_until(lambda: offered(lambda o: True) is not None, timeout=60)
        first = offered(lambda o: True)
        assert first is not None
        assert first.resources == total - TASK - TASK - EXECUTOR
        assert master.books.frameworks[fw.framework_id].executors == {(sid, "pod"): EXECUTOR}

        await fw.decline(first, refuse=0)
        await fw.bus.publish(fw.to_master, Kill(framework_id=fw.framework_id, task_id="web"))
        failure = await fw.inbox.wait_for(Failure, lambda m: m.executor_id == "pod", timeout=60)
        assert failure.slave_id == sid
        await eventually(lambda: not master.books.frameworks[fw.framework_id].executors)
        # the whole slave offered again: what it holds out declined (once more as more
        # comes, an offer of the freed part, say) until an offer is of all of it
        fid = fw.framework_id
        while offered(lambda o: o.resources == total) is None:
            held = [i for i, r in master.books.offers.items() if r.framework_id == fid]
            count = len(fw.inbox.of(Offers))
            if held:
                back = Decline(framework_id=fid, offer_ids=held, filters=Filters(refuse_seconds=0))
                await fw.bus.publish(fw.to_master, back)
            await more_offers(fw, count)


async def run_group(fw: FakeFramework, offer: Offer, tasks: list[TaskInfo]) -> None:
    """`tasks` launched on `offer` as a group under executor `pod`, and heard running."""
    group = TaskGroup(executor_id="pod", executor_resources=EXECUTOR, tasks=tasks)
    accept = Accept(
        framework_id=fw.framework_id,
        offer_ids=[offer.offer_id],
        groups=[group],
        filters=Filters(refuse_seconds=3600),
    )
    await fw.bus.publish(fw.to_master, accept)
    await fw.inbox.wait_until(
        lambda: all(fw.heard(t.task_id, TaskState.RUNNING) for t in tasks), timeout=60
    )


async def more_offers(fw: FakeFramework, count: int) -> None:
    """Wait for an offer past the first `count` offers messages received."""
    await fw.inbox.wait_until(lambda: len(fw.inbox.of(Offers)) > count, timeout=60)
