"""A health check that cannot start one check stops checking for good: a hung task is
never killed, and stays "healthy" in every view.

Scenario: a service with a COMMAND health check (3 failures in a row kill it) is healthy,
then hangs. While it hangs, one check cannot be started: the slave's fork fails for a
moment (EAGAIN: the host is at its process or memory limit, which a hung, leaking
service makes likelier; or EMFILE on a slave with many tasks). The checks after it fail.

Mesos: the checker counts a check it could not launch as a failure ("Failed to create
subprocess"), the next failures follow, and the task is killed after
`consecutive_failures`. docs/how-to/long-running.md: "After `consecutive_failures`
failures in a row the task is killed with its kill policy's grace and ends
`TASK_KILLED`".

drfmesos: `protocol.health_checker.check_health` calls the probe without catching what
it raises; `command_probe` lets the OSError of `asyncio.create_subprocess_exec` out (and
`http_probe` a ValueError, from `int()` of a status code in Latin-1 digits, `HTTP/1.1
\\xb200`), so the check's asyncio task ends with the error, logged once
(`health.check_failed`) by `HealthChecks._ended`, and no check runs again. Nothing kills
the task, its framework is told nothing, and its last verdict (healthy) stays in the
master's state and /metrics.

Why a user relies on it: the health check is the one thing that replaces a hung
service; one transient fork failure on a busy slave must not switch it off silently.
"""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path
from typing import Any

import pytest

from protocol import logs
from protocol.health_checker import HealthChecks, command_probe
from protocol.transport.aio import within
from protocol.wire.health import CommandCheck, HealthCheck, HealthCheckType

CHECK = HealthCheck(
    type=HealthCheckType.COMMAND,
    command=CommandCheck(value="test -f ok"),
    delay_seconds=0,
    interval_seconds=1,
    grace_period_seconds=0,
    consecutive_failures=3,
)


async def test_a_check_that_could_not_start_counts_as_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ok").touch()
    real = asyncio.create_subprocess_exec
    starts = 0

    async def fork_fails_once(*args: Any, **kw: Any) -> asyncio.subprocess.Process:
        nonlocal starts
        starts += 1
        if starts == 2:  # (the first check after the service hung)
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
        return await real(*args, **kw)

    monkeypatch.setattr(asyncio, "create_subprocess_exec", fork_fails_once)  # (its module's)

    def probe() -> Any:
        return command_probe(["sh", "-c", "test -f ok"], cwd=tmp_path, env={}, timeout=5)

    killed = asyncio.Event()

    async def said(healthy: bool, why: str) -> None:
        if healthy:
            (tmp_path / "ok").unlink()  # healthy once, then it hangs

    async def failed(why: str) -> None:
        killed.set()

    checks = HealthChecks(logs.get("test"))
    checks.start(("fw", "svc"), CHECK, probe, said, failed)
    try:
        # a check a second: the failed start, then two failures, and it is killed
        await within(killed.wait(), 10)
    finally:
        await checks.close()
