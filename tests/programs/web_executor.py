"""An executor whose tasks each serve HTTP, for tests/test_executor_health.py: a task's
data is JSON `{"port": N}`; it answers every GET on 127.0.0.1:N with 200, or 500 once
`sick` is in its sandbox, and counts the GETs it answered in its sandbox's `gets`. A
kill stops its server, leaves the grace it was given in its sandbox's `grace`, and
reports TASK_KILLED (with no message of its own: the driver says why)."""

from __future__ import annotations

import asyncio
import json

from frameworks.executor import Executor, ExecutorDriver
from protocol import logs
from protocol.wire.messages import TaskInfo, TaskState, TaskStatus


class Web(Executor):
    def __init__(self) -> None:
        self.servers: dict[str, asyncio.Server] = {}

    async def launch_task(self, driver: ExecutorDriver, task: TaskInfo) -> None:
        port = int(json.loads(task.data)["port"])
        sandbox = driver.sandbox(task.task_id)
        gets = 0

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal gets
            await reader.readuntil(b"\r\n\r\n")
            code = 500 if (sandbox / "sick").exists() else 200
            writer.write(f"HTTP/1.0 {code} X\r\n\r\n".encode())
            await writer.drain()
            writer.close()
            gets += 1
            (sandbox / "gets").write_text(str(gets))

        self.servers[task.task_id] = await asyncio.start_server(answer, "127.0.0.1", port)
        await driver.send_status_update(TaskStatus(task_id=task.task_id, state=TaskState.RUNNING))

    async def kill_task(self, driver: ExecutorDriver, task_id: str) -> None:
        driver.sandbox(task_id).joinpath("grace").write_text(str(driver.kill_grace(task_id)))
        server = self.servers.pop(task_id, None)
        if server is not None:
            server.close()
            await server.wait_closed()
        await driver.send_status_update(TaskStatus(task_id=task_id, state=TaskState.KILLED))


if __name__ == "__main__":
    logs.configure("warning")
    asyncio.run(ExecutorDriver(Web()).run())
