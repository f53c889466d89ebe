"""Task groups end to end: an unmodified pymesos 0.3.15 framework ACCEPTs two LAUNCH_GROUP
operations under one default executor, through Mesos's v1 scheduler API, on a live secure
cluster of real processes (mosquitto, a master, a slave) (tests/programs/pymesos_task_group.py).

pymesos needs http-parser built without its C extension (.ci/pymesos.sh): outside CI a
machine without them skips, in CI that is a failure."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from cluster.testing import reachable

from conftest import need_mosquitto
from harness.helpers import secure_cluster
from harness.pymesos import need_pymesos, running

CLUSTER = "pods"
PRINCIPALS = [("master", "master"), ("ops", "operator"), ("slave-0", "slave"),
              ("team-a", "framework")]  # fmt: skip
PROGRAM = Path(__file__).parent / "programs" / "pymesos_task_group.py"


async def test_pymesos_launches_task_groups_and_a_failed_task_takes_its_group_down(
    tmp_path: Path,
) -> None:
    """`fail` exits 3: `web`, of its group, is killed; `steady`, of another group on the
    same executor, runs on until killed; then the executor ends, and pymesos hears it."""
    need_mosquitto()
    need_pymesos()
    reachable(tmp_path)
    slaves = [("slave-0", "--resources", "cpus:2;mem:1024", "--kill-grace", "1")]
    async with secure_cluster(tmp_path, CLUSTER, PRINCIPALS, slaves) as c:
        master = c.web.split("//")[1].rstrip("/")
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(PROGRAM), master, "team-a", str(c.store.secret_file("team-a")),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with running(process) as fw:
            await fw.until("REGISTERED")
            await fw.first("STATUS", "steady", "TASK_RUNNING", "pod")
            await fw.first("STATUS", "fail", "TASK_FAILED", "pod")
            await fw.first("STATUS", "web", "TASK_KILLED", "pod")
            # the other group runs on: its task has said nothing more than RUNNING
            steady = [line[2] for line in fw.lines if line[:2] == ["STATUS", "steady"]]
            assert "TASK_KILLED" not in steady
            assert ["EXECUTOR_LOST", "pod"] not in fw.lines
            assert process.stdin is not None
            process.stdin.write(b"KILL steady\n")
            await fw.first("STATUS", "steady", "TASK_KILLED", "pod")
            await fw.first("EXECUTOR_LOST", "pod")  # (its last task ended: it ends too)
