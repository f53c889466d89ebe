"""asyncio helpers every party's shell uses: waiting with a deadline, cancelling a task for
good, finishing a step that a cancel must not cut halfway, waiting for the first of several
events, and running a callback in the background with its error logged."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from protocol.transport.base import BusClosed

T = TypeVar("T")


async def within(step: Awaitable[T], timeout: float | None) -> T:
    """`step`'s result, or TimeoutError after `timeout` seconds (None: no deadline).

    `asyncio.wait_for` on Python 3.11 loses a cancel that arrives in the loop turn its
    step finishes: it returns the result and the cancelled task runs on, so a party
    cancelled at shutdown never stopped (a slave fleet whose start awaited a SUBACK).
    This waits under `asyncio.timeout` in the caller's own task, as 3.12's `wait_for`
    does, and a cancel always ends it. (ruff bans `asyncio.wait_for` for this.) Before
    3.11.3 (Debian bookworm's 3.11.2) a deadline passing in a task already cancelled
    raises CancelledError, not TimeoutError (gh-102780): the cancel goes on, as it should."""
    if timeout is None:
        return await step
    async with asyncio.timeout(timeout):
        return await step


async def cancel_and_wait(task: asyncio.Task[Any], timeout: float = 5.0) -> None:
    """Cancel a task and wait until it is really done.

    On Python 3.11 a task in a library's `asyncio.wait_for` (aiomqtt's calls) may swallow
    the first cancel (see `within`), so keep cancelling until it has finished.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=0.1)
        if loop.time() > deadline:
            break
    if task.done() and not task.cancelled():
        task.exception()  # mark retrieved: errors were logged where they happened


async def finish(step: Awaitable[T]) -> T:
    """Run `step` to its end even if the caller is cancelled meanwhile, then let the cancel
    go on: a stop cut halfway (a master's loops left running) is worse than a late one, so
    only steps that need nothing outside this process belong here."""
    task = asyncio.ensure_future(step)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
            break
        except asyncio.CancelledError:
            if task.done():  # the step itself was cancelled, not us
                raise
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return result


async def first_of(*events: asyncio.Event, timeout: float | None = None) -> None:
    """Wait until any of `events` is set, or `timeout` passes (the caller then looks which)."""
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


def spawn_guarded(coro: Awaitable[None], tasks: set[asyncio.Task[Any]], log: Any) -> None:
    """Run `coro` as a task kept in `tasks` until it ends; an error is logged, not lost."""

    async def guarded() -> None:
        try:
            await coro
        except (asyncio.CancelledError, BusClosed):
            raise
        except Exception:
            log.exception("bus.callback_failed")

    task = asyncio.create_task(guarded())
    tasks.add(task)
    task.add_done_callback(tasks.discard)


def loop_time() -> float:
    """The running loop's clock (monotonic seconds): the one every party's timers read."""
    return asyncio.get_running_loop().time()
