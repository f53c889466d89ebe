"""A custom executor for the tests: each task sleeps for the seconds in its data."""

from __future__ import annotations

import asyncio
import json

from frameworks import Executor, ExecutorDriver, TaskInfo, TaskState, TaskStatus
from protocol import logs


class SleepExecutor(Executor):
    def __init__(self) -> None:
        self.running: dict[str, asyncio.Task[None]] = {}

    async def launch_task(self, driver: ExecutorDriver, task: TaskInfo) -> None:
        self.running[task.task_id] = driver.spawn(self.work(driver, task))

    async def work(self, driver: ExecutorDriver, task: TaskInfo) -> None:
        await driver.send_status_update(TaskStatus(task_id=task.task_id, state=TaskState.RUNNING))
        await asyncio.sleep(json.loads(task.data or b'{"duration": 0}')["duration"])
        await driver.send_status_update(
            TaskStatus(task_id=task.task_id, state=TaskState.FINISHED, message="slept")
        )

    async def kill_task(self, driver: ExecutorDriver, task_id: str) -> None:
        if task := self.running.pop(task_id, None):
            task.cancel()
        await driver.send_status_update(TaskStatus(task_id=task_id, state=TaskState.KILLED))

    async def framework_message(self, driver: ExecutorDriver, data: bytes) -> None:
        await driver.send_framework_message(b"echo:" + data)


if __name__ == "__main__":
    logs.configure("warning")
    asyncio.run(ExecutorDriver(SleepExecutor()).run())
