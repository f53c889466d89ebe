"""Review 64 (on f67adde): an executor's container resized after its executor exited is
made again in the group of principal "" (nobody's, on a secure cluster), and stays there.

A custom executor's task ends: the slave shrinks the executor's container to what is
left (`ExecutorSide._resize`), first reading what the executor holds (a thread hop:
`isolator.usage`), then `isolator.prepare(name, total)`, with no principal (a resize
"stays in the group it is in": `_live`). If the executor exits during that hop (an
executor that ends with its last task: the task's FINISHED, then its exit), its
container is destroyed and forgotten (`_ended`), and the resize that follows finds no
group for it: it makes `drfmesos/<slave>/~p./e.<framework>.<executor>`, books the dead
executor's share there, and remembers the container as live. Nothing removes it while
the slave runs (the slave's parent, not empty, stays at its close too), and the same
executor started again by its framework is put there, in the group of principal "",
outside its principal's group and its bound.

Here mallory's executor is killed during that thread hop (the hop is made to wait for
the executor's exit, the interleaving a real exit at its task's end may have), then her
framework starts the executor again with a task. Expected: it runs in mallory's group
(`~p.mallory`), and no cgroup of hers is left in another."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any

import pytest

from protocol.wire.messages import CommandInfo, ExecutorInfo, TaskState
from protocol.wire.resources import Resources
from slave.isolator import executor_container_name, group_name

from harness.cgroups import ROOT, need_cgroups
from harness.helpers import eventually
from harness.shared_slave import MALLORY, shared_slave
from task_python import task_python_env

pytestmark = pytest.mark.timeout(60)

EXECUTOR = ExecutorInfo(
    executor_id="x",
    command=CommandInfo(value='exec "$DRFMESOS_PYTHON" -m frameworks.samples.sleep_executor'),
    resources=Resources(cpus=0.1, mem=64),
)


def holding(parent: str, name: str) -> list[str]:
    """The groups under the slave's parent where a cgroup called `name` holds processes."""
    return sorted(
        procs.parent.parent.name
        for procs in (ROOT / "pids" / parent).glob(f"*/{name}/cgroup.procs")
        if procs.read_text().strip()
    )


async def test_an_executor_resized_as_it_exits_is_not_made_again_outside_its_group() -> None:
    need_cgroups()
    async with shared_slave(isolation="cgroups", task_env=task_python_env()) as s:
        custom = s.slave.custom
        key = (MALLORY, "x")
        usage = s.slave.isolator.usage
        resize = custom._resize
        resized = asyncio.Event()

        async def usage_as_it_exits(running: Any) -> Any:
            found = await usage(running)
            executor = custom.executors.get(key)
            if executor is not None and executor.pid is not None:
                with contextlib.suppress(ProcessLookupError):  # (it exits meanwhile)
                    os.kill(executor.pid, signal.SIGKILL)
                await eventually(lambda: key not in custom.executors)
            return found

        async def resize_once(executor: Any, new: Any = None) -> None:
            await resize(executor, new)
            if new is None:
                resized.set()

        s.slave.isolator.usage = usage_as_it_exits  # type: ignore[method-assign]
        custom._resize = resize_once  # type: ignore[method-assign]
        await s.master.run("mallory", MALLORY, "m1", '{"duration": 0}', executor=EXECUTOR)
        await s.master.reaches(MALLORY, "m1", TaskState.FINISHED, timeout=30)
        await resized.wait()  # (the shrink after m1's end, its executor gone meanwhile)
        s.slave.isolator.usage = usage  # type: ignore[method-assign]
        custom._resize = resize  # type: ignore[method-assign]

        # her framework starts the executor again, with a task that runs on
        await s.master.run("mallory", MALLORY, "m2", '{"duration": 300}', executor=EXECUTOR)
        try:
            await s.master.reaches(MALLORY, "m2", TaskState.RUNNING, timeout=30)
            parent = s.slave.isolator.parent  # type: ignore[attr-defined]
            where = holding(parent, executor_container_name(MALLORY, "x"))
            assert where == [group_name("mallory")], (
                f"mallory's executor, started again, runs in the group(s) {where}, not hers"
            )
        finally:  # (its end, then its cgroup's, before the slave stops)
            executor = custom.executors.get(key)
            if executor is not None and executor.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(executor.pid, signal.SIGKILL)
                await eventually(lambda: key not in custom.executors)
