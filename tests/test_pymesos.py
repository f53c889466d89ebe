"""An unmodified pymesos 0.3.15 framework on a live, secure drfmesos cluster, through
Mesos's v1 Scheduler HTTP API: it runs 50 command tasks, sees them all finish, kills a
task and reconciles it (tests/programs/pymesos_scheduler.py).

pymesos needs http-parser built without its C extension (.ci/pymesos.sh): outside CI a
machine without them skips, in CI that is a failure."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from conftest import need_mosquitto
from helpers import SecureCluster, secure_cluster

CLUSTER = "pymesos"
PRINCIPALS = [("master", "master"), ("ops", "operator"), ("slave-0", "slave"),
              ("slave-1", "slave"), ("team-a", "framework")]  # fmt: skip
PROGRAM = Path(__file__).parent / "programs" / "pymesos_scheduler.py"


def need_pymesos() -> None:
    if importlib.util.find_spec("pymesos") and importlib.util.find_spec("http_parser"):
        return
    if os.environ.get("CI"):
        pytest.fail("pymesos is not installed; .ci/run installs it (.ci/pymesos.sh)")
    pytest.skip("pymesos is not installed (bash .ci/pymesos.sh)")


class Framework:
    """The pymesos program, its lines read one at a time."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[list[str]] = []

    async def until(self, *words: str, timeout: float = 60.0) -> list[str]:
        """Read lines until one starts with `words`; that line."""
        assert self.process.stdout is not None
        async with asyncio.timeout(timeout):
            while True:
                raw = await self.process.stdout.readline()
                assert raw, f"the framework ended before {words}: {self.lines[-5:]}"
                line = raw.decode().split()
                self.lines.append(line)
                if tuple(line[: len(words)]) == words:
                    return line


@contextlib.asynccontextmanager
async def pymesos_framework(
    master: str, c: SecureCluster, count: int, *executor: str
) -> AsyncIterator[Framework]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(PROGRAM), master, "team-a", str(c.store.secret_file("team-a")),
        str(count), *executor,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        yield Framework(process)
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            async with asyncio.timeout(10):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()


async def test_pymesos_runs_50_tasks_kills_one_and_reconciles(tmp_path: Path) -> None:
    need_mosquitto()
    need_pymesos()
    slaves = [(f"slave-{i}", "--resources", "cpus:4;mem:2048") for i in range(2)]
    async with secure_cluster(tmp_path, CLUSTER, PRINCIPALS, slaves) as c:
        master = c.web.split("//")[1].rstrip("/")
        async with pymesos_framework(master, c, 50) as fw:
            await fw.until("REGISTERED")
            await fw.until("FINISHED_ALL", timeout=120)
            finished = {line[1] for line in fw.lines if line[:1] == ["STATUS"]
                        and line[2] == "TASK_FINISHED"}  # fmt: skip
            assert finished == {f"short-{i}" for i in range(50)}
            # every update the slave sent wanted an acknowledgement (pymesos sends it)
            assert all(line[3] == "uuid" for line in fw.lines if line[:1] == ["STATUS"])
            await fw.until("STATUS", "long", "TASK_KILLED", "uuid")
            # the reconciliation's answer: from the master, no acknowledgement due
            await fw.until("STATUS", "long", "TASK_KILLED", "-")
