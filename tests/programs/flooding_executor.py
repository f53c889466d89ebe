"""An executor that floods its slave, as a hostile tenant's would: for its task, 300
RUNNING updates whose messages are 100,000 characters each (built unvalidated, as a raw
client sends them), then one whose opaque data is past the bound, then the task's end.
Whatever the slave answers is printed to stdout (its sandbox), one line each, and
`flooded` once all is sent.
"""

from __future__ import annotations

import asyncio
import os

from protocol.transport.channel import Channel
from protocol.wire.messages import RegisterExecutor, RunTask, StatusUpdate, TaskState, TaskStatus

UPDATES = 300


def status(task_id: str, state: TaskState, **fields: object) -> StatusUpdate:
    raw = TaskStatus.model_construct(task_id=task_id, state=state, **fields)
    return StatusUpdate.model_construct(framework_id="x", slave_id="x", status=raw)


async def main() -> None:
    channel = await Channel.from_fd(int(os.environ["DRFMESOS_EXECUTOR_FD"]))
    slave = os.environ["DRFMESOS_SLAVE_ID"]
    token = os.environ.get("MESOS_EXECUTOR_AUTHENTICATION_TOKEN", "")
    channel.send(RegisterExecutor(slave_id=slave, framework_id="x", executor_id="x", token=token))
    while True:
        item = await channel.receive()
        message = getattr(item, "message", None)
        print(type(message).__name__, getattr(message, "code", ""), flush=True)
        if isinstance(message, RunTask):
            task_id = message.task.task_id
            for i in range(UPDATES):
                channel.send(status(task_id, TaskState.RUNNING, message=f"{i}:" + "x" * 100_000))
                await channel.drain()
            channel.send(status(task_id, TaskState.RUNNING, data=b"d" * (1 << 20)))
            channel.send(status(task_id, TaskState.FINISHED, message="the end"))
            await channel.drain()
            print("flooded", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
