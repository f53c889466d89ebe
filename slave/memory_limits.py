"""A command task's memory, held to what it asked for: the slave reads each task's
process group's RSS and kills the task that goes over (posix isolation's limit)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from protocol.wire.messages import Reason, TaskState
from slave.config import TaskRecord
from slave.runners import Limit, group_rss_mb


async def enforce_memory_limits(
    tasks: Mapping[tuple[str, str], TaskRecord], interval: float, log: Any
) -> None:
    """Every `interval` seconds, until cancelled: kill the tasks over their memory."""
    while True:
        await asyncio.sleep(interval)
        runners = {
            r.runner.pid: r.runner
            for r in tasks.values()
            if r.runner is not None and r.runner.pid and not r.state.terminal
        }
        if not runners:
            continue
        usage = await asyncio.to_thread(group_rss_mb, list(runners))
        for pid, rss in usage.items():
            runner = runners[pid]
            limit = runner.memory_limit_mb
            if limit is not None and rss > limit:
                message = (
                    f"used {rss:.0f} MB of memory, over the {limit:g} MB the task "
                    f"asked for: raise the task's mem or use less"
                )
                log.warning(
                    "task.memory_limit",
                    task_id=runner.task.task_id,
                    rss_mb=round(rss),
                    limit_mb=limit,
                )
                await runner.kill(0.0, Limit(TaskState.FAILED, Reason.MEMORY_LIMIT, message))
