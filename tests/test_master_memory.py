"""What the master keeps of a tenant's input once it is done with it (issue 45's memory
after an attack; `python -m benchmarks.fuzz` measures the RSS): an ended task keeps no
command, environment or data, and a kept status no executor data."""

from __future__ import annotations

import tracemalloc

from master.books import Framework, Task
from protocol.wire.messages import (
    CommandInfo,
    ExecutorInfo,
    TaskInfo,
    TaskState,
    TaskStatus,
)
from protocol.wire.resources import Resources


def test_an_ended_task_keeps_no_command_environment_or_data() -> None:
    """A framework keeps its last 1,000 ended tasks (and 50 removed frameworks theirs):
    each kept its whole TaskInfo, a tenant's command, environment and data (up to a
    megabyte a task), and its last status's data. 1,000 ended tasks of 100 KB each held
    some 100 MB after they ended; now what the views read (ids, name, resources, the
    executor's id) is kept."""
    fw = Framework("f1", "mallory", "m", "mallory", "in", "", 0.0, 0.0)
    big = "x" * 30_000
    command = CommandInfo(value=f"true {big}", environment={"PAD": big})
    executor = ExecutorInfo(executor_id="e1", command=command)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(1000):
            info = TaskInfo(
                task_id=f"t{i}",
                name=f"task {i}",
                slave_id="s1",
                resources=Resources(cpus=0.1, mem=1),
                executor=executor if i % 2 else None,
                command=None if i % 2 else command,
                data=b"d" * 40_000,
            )
            task = Task(info, "f1", "s1", TaskState.RUNNING)
            fw.tasks[task.task_id] = task
            status = TaskStatus(
                task_id=task.task_id, state=TaskState.FINISHED, slave_id="s1", data=b"s" * 40_000
            )
            fw.complete(task, status)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 5 * 2**20, f"{held / 2**20:.1f} MiB for 1,000 ended tasks"
    ended = fw.ended["t1"]
    assert (ended.task_id, ended.info.name, ended.resources) == (
        "t1",
        "task 1",
        Resources(cpus=0.1, mem=1),
    )
    assert ended.info.executor is not None
    assert ended.info.executor.executor_id == "e1"  # (a read of its log finds it by this)
    assert big not in repr(ended.info)
    assert big not in repr(fw.ended["t0"].info)
    assert fw.completed["t1"].data == b""
    assert fw.completed["t1"].state == TaskState.FINISHED
