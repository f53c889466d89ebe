"""A framework's update of itself, as its driver makes it (`driver.update_framework()`):
an `UpdateFramework` sent, and the master's `FrameworkUpdated` (or its refusal) awaited.
One at a time: each replaces all that the framework says of itself, its capabilities
(`capabilities_of`, as it subscribes with them) among it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from frameworks.errors import DriverError
from protocol.transport.aio import within
from protocol.wire.messages import (
    Error,
    FrameworkCapability,
    FrameworkUpdated,
    UpdateFramework,
    Wire,
)


class Updater:
    def __init__(self, call: Callable[[Wire], None]) -> None:
        """`call`: sends a call to the master."""
        self._call = call
        self._lock = asyncio.Lock()
        self._answer: asyncio.Future[FrameworkUpdated] | None = None

    async def update(self, msg: UpdateFramework, timeout: float) -> FrameworkUpdated:
        async with self._lock:
            self._answer = answer = asyncio.get_running_loop().create_future()
            try:
                self._call(msg)
                try:
                    return await within(answer, timeout)
                except TimeoutError:
                    raise DriverError(
                        f"no answer from the master about the update in {timeout:g}s"
                    ) from None
            finally:
                self._answer = None

    async def on_answer(self, msg: FrameworkUpdated, _reply_to: str | None) -> None:
        answer = self._answer
        if answer is not None and not answer.done():
            answer.set_result(msg)

    def on_error(self, msg: Error) -> bool:
        """The master refused our update: its caller hears why (True), or the error is
        about something else (False)."""
        if msg.about != UpdateFramework.TYPE:
            return False
        answer = self._answer
        if answer is not None and not answer.done():
            answer.set_exception(DriverError(f"{msg.code}: {msg.message}"))
        return True


def capabilities_of(
    partition_aware: bool, task_killing: bool, shared_resources: bool, multi_role: bool
) -> list[FrameworkCapability]:
    wants = {
        "PARTITION_AWARE": partition_aware,
        "TASK_KILLING_STATE": task_killing,
        "SHARED_RESOURCES": shared_resources,
        "MULTI_ROLE": multi_role,
    }
    return [FrameworkCapability(c) for c, on in wants.items() if on]
