"""A task group outlives its slave's restart: the slave (a real process, SIGKILLed and
started again on its work dir) brings its group's tasks back in their group and under
their executor, so that a task failing after the restart still has its siblings killed,
and the executor still ends, its resources given back, with its last task.

Mesos: the default executor is a process of its own that an agent restart does not
touch; it goes on killing a failed task's group and ends with its last task. drfmesos's
slave plays that executor, so it keeps what it needs of each group with the task.
"""

from __future__ import annotations

from pathlib import Path

from protocol.tooling.brokers import MosquittoBroker
from protocol.wire.messages import (
    Accept,
    CommandInfo,
    Failure,
    Filters,
    TaskGroup,
    TaskInfo,
    TaskState,
    Update,
)
from protocol.wire.resources import Resources
from slave.paths import task_sandbox

from harness.helpers import eventually
from harness.slave import restartable_slave

EXECUTOR = Resources(cpus=0.1, mem=32)
TASK = Resources(cpus=0.25, mem=32)
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

        group = TaskGroup(
            executor_id="pod",
            executor_resources=EXECUTOR,
            tasks=[task("web", "sleep 300"), task("job", FAILS_WHEN_TOLD)],
        )
        accept = Accept(
            framework_id=fw.framework_id,
            offer_ids=[offer.offer_id],
            groups=[group],
            filters=Filters(refuse_seconds=3600),
        )
        await fw.bus.publish(fw.to_master, accept)

        def heard(task_id: str, state: TaskState) -> bool:
            return any(
                (u.status.task_id, u.status.state) == (task_id, state) for u in fw.inbox.of(Update)
            )

        await fw.inbox.wait_until(
            lambda: heard("web", TaskState.RUNNING) and heard("job", TaskState.RUNNING),
            timeout=60,
        )
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

        await fw.inbox.wait_until(lambda: heard("web", TaskState.KILLED), timeout=60)
        assert ended("job", TaskState.FAILED).status.executor_id == "pod"
        killed = ended("web", TaskState.KILLED).status
        assert killed.message == "killed: task job of its group ended TASK_FAILED"
        assert killed.executor_id == "pod"
        # its executor ended with them: the framework hears it, the master frees it
        failure = await fw.inbox.wait_for(Failure, timeout=60)
        assert (failure.executor_id, failure.slave_id) == ("pod", sid)
        assert booked.executors == {}
