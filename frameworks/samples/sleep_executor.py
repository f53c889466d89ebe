"""The blog's executor: each task sleeps for its duration, then reports TASK_FINISHED.

    python -m frameworks.samples.sleep_executor     (started by the slave, not by hand)

A task's data is JSON `{"duration": seconds}`. Scheduler messages are echoed back, which
makes the executor handy for trying framework messages too.
"""

from __future__ import annotations

import asyncio
import json

from frameworks.executor import Executor, ExecutorDriver
from protocol import logs
from protocol.wire.messages import TaskInfo, TaskState, TaskStatus


def duration_of(task: TaskInfo) -> float:
    try:
        return max(0.0, float(json.loads(task.data)["duration"]))
    except (ValueError, KeyError, TypeError):
        return 0.0


class SleepExecutor(Executor):
    def __init__(self) -> None:
        self.running: dict[str, asyncio.Task[None]] = {}

    async def launch_task(self, driver: ExecutorDriver, task: TaskInfo) -> None:
        self.running[task.task_id] = driver.spawn(self._sleep(driver, task))

    async def _sleep(self, driver: ExecutorDriver, task: TaskInfo) -> None:
        await driver.send_status_update(TaskStatus(task_id=task.task_id, state=TaskState.RUNNING))
        seconds = duration_of(task)
        await driver.output(task.task_id, f"task {task.task_id}: sleeping {seconds:.1f}s\n")
        await asyncio.sleep(seconds)
        self.running.pop(task.task_id, None)
        await driver.send_status_update(
            TaskStatus(
                task_id=task.task_id, state=TaskState.FINISHED, message=f"slept {seconds:.2f}s"
            )
        )

    async def kill_task(self, driver: ExecutorDriver, task_id: str) -> None:
        if (task := self.running.pop(task_id, None)) is not None:
            task.cancel()
        await driver.send_status_update(TaskStatus(task_id=task_id, state=TaskState.KILLED))

    async def framework_message(self, driver: ExecutorDriver, data: bytes) -> None:
        await driver.send_framework_message(b"echo:" + data)


def main() -> None:
    logs.configure("warning")
    asyncio.run(ExecutorDriver(SleepExecutor()).run())


if __name__ == "__main__":
    main()
