"""A custom executor that tries to speak for others, then behaves.

Over its line to the slave it registers (with its own token) claiming another framework's
and executor's ids,
reports FINISHED for a task of another framework on the same slave (its id in argv[1])
and for a task that does not exist, sends garbage, then reports its own task RUNNING.
Whatever the slave answers is printed to stdout (its sandbox), one line each.
"""

from __future__ import annotations

import asyncio
import os
import struct
import sys

from protocol.transport.channel import Channel
from protocol.wire.messages import (
    RegisterExecutor,
    RunTask,
    StatusUpdate,
    TaskState,
    TaskStatus,
)


async def main(victim_task: str) -> None:
    channel = await Channel.from_fd(int(os.environ["DRFMESOS_EXECUTOR_FD"]))
    slave = os.environ["DRFMESOS_SLAVE_ID"]
    token = os.environ.get("MESOS_EXECUTOR_AUTHENTICATION_TOKEN", "")  # (its own)
    channel.send(
        RegisterExecutor(slave_id=slave, framework_id="someone-else", executor_id="x", token=token)
    )
    while True:
        item = await channel.receive()
        message = getattr(item, "message", None)
        print(
            type(message).__name__ if message else "bad", getattr(message, "code", ""), flush=True
        )
        if isinstance(message, RunTask):
            for task_id in (victim_task, "no-such-task"):
                forged = TaskStatus(task_id=task_id, state=TaskState.FINISHED)
                channel.send(
                    StatusUpdate(framework_id="someone-else", slave_id="other", status=forged)
                )
            garbage = b"\x93\x01garbage"
            channel._writer.write(struct.pack(">I", len(garbage)) + garbage)
            own = TaskStatus(task_id=message.task.task_id, state=TaskState.RUNNING)
            channel.send(StatusUpdate(framework_id="x", slave_id="x", status=own))
            await channel.drain()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
