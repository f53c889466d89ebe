"""Run one long-lived party (master, slave, framework, broker) until a signal arrives."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Coroutine
from typing import Any

from protocol import logs
from protocol.brokers import BrokerURL, open_broker

log = logs.get("runner")


async def until_signalled(stop: asyncio.Event | None = None) -> None:
    """Wait for SIGINT or SIGTERM (or `stop`)."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)


def run_party(broker: str, party: Callable[[BrokerURL], Coroutine[Any, Any, None]]) -> None:
    """Open the broker (starting one for `embedded`/`mosquitto`) and run `party` on it.

    `party` runs until it returns or until SIGINT/SIGTERM, which cancels it so that its
    own `finally`/`async with` blocks shut it down cleanly.
    """

    async def main() -> None:
        async with open_broker(broker) as url:
            task = asyncio.create_task(party(url))
            signalled = asyncio.create_task(until_signalled())
            done, _ = await asyncio.wait({task, signalled}, return_when=asyncio.FIRST_COMPLETED)
            for t in (task, signalled):
                if not t.done():
                    t.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await t
            if task in done:
                task.result()  # re-raise a party's failure

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
