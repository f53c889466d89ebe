"""Review 64 (on f67adde): a slave that stops with a custom executor running leaves the
executor's cgroup behind, and with it its principal's group and the slave's parent.

Custom executors cannot be recovered, so a stopping slave always shuts them down
(`Slave.stop`: `executor.shutdown`, then `executor.close`). The close cancels the
executor's watcher before it has run `_executor_exited`, which alone destroys the
executor's container: its cgroup is never destroyed nor handed to the upkeep, so
`drfmesos/<slave>/~p.mallory/e.<framework>.x` stays in every hierarchy, and with it
`~p.mallory` and `drfmesos/<slave>` (neither is empty at the isolator's close). Only
this slave's next start on its work dir, or another slave's sweep a minute on, removes
them; a slave moved or retired leaves them for good, one per executor it ran.

(Older than the groups: at ecf172e the same stop left drfmesos/<slave>/e.<framework>.x and
the parent; the groups add `~p.<principal>` to what is left.)

Expected: once the slave has stopped, nothing of it is left under drfmesos/."""

from __future__ import annotations

import contextlib
import os

import pytest

from protocol.wire.messages import CommandInfo, ExecutorInfo, TaskState
from protocol.wire.resources import Resources

from harness.cgroups import ROOT, need_cgroups
from harness.shared_slave import MALLORY, shared_slave
from task_python import task_python_env

pytestmark = pytest.mark.timeout(60)

EXECUTOR = ExecutorInfo(
    executor_id="x",
    command=CommandInfo(value='exec "$DRFMESOS_PYTHON" -m frameworks.samples.sleep_executor'),
    resources=Resources(cpus=0.1, mem=64),
)


def left(parent: str) -> list[str]:
    """What is left of the slave's parent cgroup, in any hierarchy (deepest first)."""
    found = []
    for hierarchy in ROOT.iterdir():
        top = hierarchy / parent
        if top.is_dir():
            found += [*[str(p) for p in sorted(top.rglob("*")) if p.is_dir()][::-1], str(top)]
    return found


async def test_a_slave_stopped_with_an_executor_running_leaves_no_cgroup() -> None:
    need_cgroups()
    parent = ""
    try:
        async with shared_slave(isolation="cgroups", task_env=task_python_env()) as s:
            parent = s.slave.isolator.parent  # type: ignore[attr-defined]
            await s.master.run("mallory", MALLORY, "m1", '{"duration": 300}', executor=EXECUTOR)
            await s.master.reaches(MALLORY, "m1", TaskState.RUNNING, timeout=30)
        # (the slave has stopped: its executor shut down, its isolator closed)
        assert left(parent) == [], f"the stopped slave left {left(parent)}"
    finally:
        for path in left(parent) if parent else []:  # (what this test's slave left)
            with contextlib.suppress(OSError):
                os.rmdir(path)
