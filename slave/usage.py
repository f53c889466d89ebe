"""A slave's running tasks' usage, read from their containers and reported to the master
every few seconds, all tasks in one `UsageReport` (Mesos's /monitor/statistics, pushed)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any

from protocol.transport.base import Transport
from protocol.wire.messages import Reason, TaskState, TaskUsage, UsageReport
from slave.isolator import Container, Isolator
from slave.runners import Limit, Runner


async def collect(slave_id: str, records: Iterable[Any], isolator: Isolator) -> UsageReport:
    """One look at every running command task (`records`: the slave's TaskRecords)."""
    running: list[tuple[str, Runner, Container]] = []
    for record in records:
        runner = record.runner
        if (
            runner is not None
            and runner.container is not None
            and runner.pid
            and not record.state.terminal
        ):
            running.append((record.framework_id, runner, runner.container))
    usages = await isolator.usage([(c, r.pid or 0) for _, r, c in running])
    now = time.time()
    return UsageReport(
        slave_id=slave_id,
        tasks=[
            TaskUsage(
                framework_id=framework_id,
                task_id=runner.task.task_id,
                cpu_user_seconds=u.cpu_user_seconds,
                cpu_system_seconds=u.cpu_system_seconds,
                cpu_throttled_seconds=u.cpu_throttled_seconds,
                memory_bytes=u.memory_bytes,
                memory_peak_bytes=u.memory_peak_bytes,
                timestamp=now,
            )
            for (framework_id, runner, _), u in zip(running, usages, strict=True)
        ],
    )


async def report_loop(
    bus: Transport,
    to_master: str,
    slave_id: str,
    records: dict[Any, Any],
    isolator: Isolator,
    registered: asyncio.Event,
    interval: float,
) -> None:
    """Every `interval` seconds while registered, if anything runs: one report (qos 0: a
    lost one is replaced by the next)."""
    while True:
        await asyncio.sleep(interval)
        if not registered.is_set() or not records:
            continue
        report = await collect(slave_id, list(records.values()), isolator)
        if report.tasks:
            bus.post(to_master, report, qos=0)
        await stop_oom_killed(list(records.values()))


async def stop_oom_killed(records: Iterable[Any]) -> None:
    """A task whose process the kernel OOM-killed while the task goes on (a child of its
    shell, say) is over its limit all the same: the whole task ends, as Mesos's does."""
    for record in records:
        runner = record.runner
        if runner is None or runner.container is None:
            continue
        if not record.state.terminal and (why := await runner.container.limitation()):
            await runner.kill(0.0, Limit(TaskState.FAILED, Reason.MEMORY_LIMIT, why))
