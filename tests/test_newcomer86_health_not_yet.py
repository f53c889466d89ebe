"""A COMMAND check run before its task's first process (`drfmesos run --health-delay 0`,
as run.md shows) said 'its health check failed: the task is not running' of a task that
was starting, and then ran: it says the task has not started yet. A task whose process
has gone still says it is not running."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from protocol.wire.health import CommandCheck
from slave.health_checks import GONE, NOT_YET, CommandProbe, TaskProcess
from slave.runners import _start_time


def probe(pid: int | None, started_at: str | None) -> CommandProbe:
    runner: Any = SimpleNamespace(pid=pid, started_at=started_at)
    run: Any = SimpleNamespace(confinement=SimpleNamespace(pid_namespace=True), user=None)
    task = TaskProcess(runner=runner, sandbox=Path("."), env={}, run=run, container=None)
    return CommandProbe(CommandCheck(value="true"), task, timeout=1.0)


def test_a_check_before_the_task_has_a_process_says_it_has_not_started() -> None:
    assert probe(None, None).start() == NOT_YET


async def test_a_check_while_the_namespace_has_no_process_yet_says_so() -> None:
    # (unshare --fork before its fork: alive, no child in its namespace yet)
    waits = "import sys; sys.stdin.read()"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", waits, stdin=asyncio.subprocess.PIPE
    )
    try:
        assert probe(proc.pid, _start_time(proc.pid)).start() == NOT_YET
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        await proc.wait()
    assert probe(proc.pid, "0").start() == GONE  # (gone: or its pid another's)
