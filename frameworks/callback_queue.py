"""The scheduler's callbacks, called one at a time, in order, as their events arrived.

They run from the driver's own task rather than the bus's: a callback that awaits an
answer (`read_file`, `why`) does not hold up the arrival of that answer. A callback that
raises is logged (`framework.callback_failed`) and the next one runs: a scheduler's bug
does not stop the driver.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from protocol.transport.aio import cancel_and_wait
from protocol.wire.messages import Wire

W = TypeVar("W", bound=Wire)
Handler = Callable[[W, str | None], Awaitable[None]]


class CallbackQueue:
    def __init__(self, log: Callable[[], Any]) -> None:
        """`log`: the driver's logger of the moment (it binds its framework id)."""
        self._log = log
        self._events: asyncio.Queue[functools.partial[Awaitable[None]]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None  # runs them, one at a time

    def queued(self, handler: Handler[W]) -> Handler[W]:
        """`handler`, for the bus to call: it runs in turn."""

        async def queue(msg: W, reply_to: str | None) -> None:
            self._events.put_nowait(functools.partial(handler, msg, reply_to))

        return queue

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="driver-callbacks")

    async def close(self) -> None:
        """Stop running them (from a callback too: the one running then ends as it will)."""
        if self._task is not None and self._task is not asyncio.current_task():
            await cancel_and_wait(self._task)
        self._task = None

    async def _run(self) -> None:
        while True:
            event = await self._events.get()
            try:
                await event()
            except Exception:  # a scheduler's bug must not stop the driver: say what it was
                self._log().exception("framework.callback_failed", callback=event.func.__name__)
