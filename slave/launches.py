"""Launch ids a slave ran lately: the broker's second delivery of a RunTasks (after it
restarts from its last save) is dropped, not run twice."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Coroutine
from typing import Any

LAUNCHES_REMEMBERED = 100_000  # launch ids a slave knows it ran, at most


class RecentLaunches:
    """Launch ids remembered for `memory` seconds (or up to the count), so that the
    slave's memory follows its launch rate, not its age."""

    def __init__(self, memory: float) -> None:
        self.memory = memory
        self._ids: set[str] = set()
        self._order: deque[tuple[float, str]] = deque()  # (when, id), oldest first

    def __contains__(self, launch_id: str) -> bool:
        return launch_id in self._ids

    def remembered(self) -> list[str]:
        """The ids remembered, oldest first."""
        return [launch_id for _, launch_id in self._order]

    def add(self, launch_id: str) -> None:
        now = time.monotonic()
        self._ids.add(launch_id)
        order = self._order
        order.append((now, launch_id))
        horizon = now - self.memory
        while order and (order[0][0] <= horizon or len(order) > LAUNCHES_REMEMBERED):
            self._ids.discard(order.popleft()[1])


async def run_together(starts: list[Coroutine[Any, Any, None]]) -> None:
    """Run these at once (a lone one directly: a task for it would cost a loop turn of
    latency, and one task at a time is what an idle cluster runs)."""
    if len(starts) == 1:
        await starts[0]
    elif starts:
        # all of them end before the launch's handler does (a kill that follows finds
        # each started), and a failure is raised as it would be one at a time
        for outcome in await asyncio.gather(*starts, return_exceptions=True):
            if isinstance(outcome, BaseException):
                raise outcome


async def run_in_turn(starts: list[Coroutine[Any, Any, None]]) -> None:
    """Run these one after another, each to its end, and raise the first failure once all
    have run (as `run_together`): for starts that wait for nothing (simulated tasks), for
    which a task each to run them at once cost more than the starts themselves."""
    failure: Exception | None = None
    for start in starts:
        try:
            await start
        except Exception as e:  # (the others run all the same, as gathered ones would)
            failure = failure or e
    if failure is not None:
        raise failure
