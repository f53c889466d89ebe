"""A slave's running tasks' and custom executors' usage, read from their containers and
reported to the master every few seconds, all in one `UsageReport` (Mesos's
/monitor/statistics, pushed)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from typing import Any

from protocol.transport.base import Transport
from protocol.wire.messages import ExecutorUsage, Reason, TaskState, TaskUsage, UsageReport
from slave.cgroups import Usage
from slave.isolator import Container, Isolator
from slave.runners import Limit, Runner


async def collect(
    slave_id: str,
    records: Iterable[Any],
    isolator: Isolator,
    executors: Iterable[Any] = (),
    disk: Mapping[tuple[str, str], int] | None = None,
) -> UsageReport:
    """One look at every running command task (`records`: the slave's TaskRecords) and
    every live custom executor (`executors`: its ExecutorProcesses), all in one read;
    with each task's disk as the disk watch last found it (`disk`: slave.disk_isolator)."""
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
    live = [e for e in executors if e.container is not None and e.pid and not e.shutting_down]
    looks = [(c, r.pid or 0) for _, r, c in running] + [(e.container, e.pid) for e in live]
    usages = await isolator.usage(looks)
    now = time.time()
    return UsageReport(
        slave_id=slave_id,
        tasks=[
            TaskUsage(
                framework_id=framework_id,
                task_id=runner.task.task_id,
                disk_used_bytes=(disk or {}).get((framework_id, runner.task.task_id)),
                **_read(u, now),
            )
            for (framework_id, runner, _), u in zip(running, usages[: len(running)], strict=True)
        ],
        executors=[
            ExecutorUsage(framework_id=e.framework_id, executor_id=e.executor_id, **_read(u, now))
            for e, u in zip(live, usages[len(running) :], strict=True)
        ],
    )


def _read(u: Usage, now: float) -> dict[str, float]:
    return {
        "cpu_user_seconds": u.cpu_user_seconds,
        "cpu_system_seconds": u.cpu_system_seconds,
        "cpu_throttled_seconds": u.cpu_throttled_seconds,
        "memory_bytes": u.memory_bytes,
        "memory_peak_bytes": u.memory_peak_bytes,
        "timestamp": now,
    }


async def report_loop(
    bus: Transport,
    to_master: str,
    slave_id: str,
    records: dict[Any, Any],
    executors: dict[Any, Any],
    isolator: Isolator,
    registered: asyncio.Event,
    interval: float,
    disk: Mapping[tuple[str, str], int] | None = None,
) -> None:
    """Every `interval` seconds while registered, if anything runs: one report (qos 0: a
    lost one is replaced by the next)."""
    while True:
        await asyncio.sleep(interval)
        if not registered.is_set() or not (records or executors):
            continue
        running = list(records.values())
        report = await collect(slave_id, running, isolator, list(executors.values()), disk)
        if report.tasks or report.executors:
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
