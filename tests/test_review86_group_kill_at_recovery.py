"""review86: a task of a group that ends KILLED while its restarted slave is still
recovering the group's other tasks must take them down too.

Recovery rejoins every group before any task is restored (so a task's end finds its
group), then restores the tasks one by one, and a restore may wait (a task it cannot
restore is reported LOST: journal writes). A task whose kill was in its grace at the
restart resumes that kill at once; if it ends meanwhile, the siblings its end kills are
those already restored -- one restored after it was left running, its group's kill
forgotten (the group's `killed` says why, but nothing looks at it again). `_run_group`
kills such a sibling once it runs; recovery did not.

In process: a slave (simulated tasks) on a work dir whose journal holds a group of
three: `a` in its kill's grace (its SIGKILL due), `x` whose record cannot be restored,
and `b` running.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest

from master.master import MasterConfig
from protocol.journal import Journal
from protocol.transport.memory import MemoryBroker
from protocol.wire.messages import CommandInfo, TaskInfo, TaskState
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics

from harness.groups import EXECUTOR, TASK
from harness.helpers import eventually, start_master, start_simulated_slave

pytestmark = pytest.mark.timeout(60)


async def test_a_task_killed_during_recovery_takes_down_siblings_restored_after_it(
    tmp_path: Path,
) -> None:
    work = tmp_path / "s1"
    work.mkdir()
    journal = Journal(work / "tasks.journal")
    kept = {"executor_id": "pod", "resources": dict(EXECUTOR.millis), "tasks": ["a", "b", "x"]}
    later = time.time() + 3600

    def task(task_id: str) -> dict[str, object]:
        info = TaskInfo(
            task_id=task_id, slave_id="s1", resources=TASK, command=CommandInfo(value="sleep 9")
        )
        return info.model_dump(mode="python")

    simulated = {"kind": "simulated", "ends_at": later}
    a = {
        "framework_id": "fw",
        "task": task("a"),
        "state": "TASK_KILLING",
        "runner": simulated,
        "kill": {"until": time.time() - 1, "state": None, "reason": None, "message": ""},
        "group": kept,
    }
    x = {"framework_id": "fw", "task": {"task_id": "x"}, "state": "TASK_RUNNING", "group": kept}
    b = {
        "framework_id": "fw",
        "task": task("b"),
        "state": "TASK_RUNNING",
        "runner": simulated,
        "group": kept,
    }
    for key, record in (("fw/a", a), ("fw/x", x), ("fw/b", b)):
        await journal.put(key, record)
    await journal.close()

    topics = Topics("groupkillrecovery")
    connect = MemoryBroker().connector(None)
    async with contextlib.AsyncExitStack() as stack:
        await start_master(stack, connect, topics, MasterConfig(allocation_interval=0.05))
        whole = Resources(cpus=2, mem=512)
        slave = await start_simulated_slave(stack, connect, topics, work, whole)
        await slave.registered.wait()
        await eventually(lambda: ("fw", "a") not in slave.tasks)  # a's kill ended it
        # b, a sibling of a KILLED task, is killed too, and the executor ends with it
        await eventually(lambda: ("fw", "b") not in slave.tasks)
        assert slave.groups.executors == {}
        assert all(r.state != TaskState.RUNNING for r in slave.tasks.values())
