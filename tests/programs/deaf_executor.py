"""A tenant's executor that runs its tasks and ignores every kill (its `kill_task` is the
SDK's no-op): for tests/test_drain_live.py, which checks that a draining slave shuts it
down rather than wait on it for ever."""

from __future__ import annotations

import asyncio

from frameworks.executor import Executor, ExecutorDriver
from protocol.wire.messages import TaskInfo, TaskState, TaskStatus


class Deaf(Executor):
    async def launch_task(self, driver: ExecutorDriver, task: TaskInfo) -> None:
        await driver.send_status_update(TaskStatus(task_id=task.task_id, state=TaskState.RUNNING))


if __name__ == "__main__":
    asyncio.run(ExecutorDriver(Deaf()).run())
