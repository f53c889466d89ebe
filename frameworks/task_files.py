"""A framework's reads of its tasks' sandbox files, through the master (Mesos's agent
files API): each a request with an id of its own, answered by a TaskFileData."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Literal

from frameworks.errors import DriverError
from protocol.transport.aio import within
from protocol.wire.messages import ReadTaskFile, TaskFileData, Wire


class TaskFiles:
    def __init__(self, call: Callable[[Wire], None]) -> None:
        """`call`: sends a call to the master."""
        self._call = call
        self._reads: dict[str, asyncio.Future[TaskFileData]] = {}

    async def read(
        self,
        framework_id: str,
        task_id: str,
        name: Literal["stdout", "stderr"],
        offset: int,
        length: int,
        timeout: float,
    ) -> TaskFileData:
        request_id = uuid.uuid4().hex
        answer: asyncio.Future[TaskFileData] = asyncio.get_running_loop().create_future()
        self._reads[request_id] = answer
        try:
            self._call(
                ReadTaskFile(
                    request_id=request_id,
                    framework_id=framework_id,
                    task_id=task_id,
                    name=name,
                    offset=offset,
                    length=length,
                )
            )
            try:
                got = await within(answer, timeout)
            except TimeoutError:
                raise DriverError(f"no answer about {task_id}'s {name} in {timeout:g}s") from None
        finally:
            self._reads.pop(request_id, None)
        if got.error:
            raise DriverError(got.error)
        return got

    async def on_answer(self, msg: TaskFileData, _reply_to: str | None) -> None:
        answer = self._reads.get(msg.request_id)
        if answer is not None and not answer.done():
            answer.set_result(msg)
