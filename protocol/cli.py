"""What every drfmesos command shares: its options, and running a party until a signal."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Coroutine
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TypeVar

import click

from protocol import logs
from protocol.brokers import BrokerURL, open_broker

F = TypeVar("F", bound=Callable[..., Any])

try:
    VERSION = version("drfmesos")
except PackageNotFoundError:  # running from a checkout that was not installed
    VERSION = "0.0.0+local"


def log_level_option(func: F) -> F:
    """`--log-level` on every command; configures structlog before the command runs."""
    return log_level_default("info")(func)


def log_level_default(default: str) -> Callable[[F], F]:
    def configure(ctx: click.Context, _param: click.Parameter, value: str) -> str:
        logs.configure(value)
        return value

    return click.option(
        "--log-level",
        type=click.Choice(logs.LEVELS),
        default=default,
        show_default=True,
        callback=configure,
        expose_value=False,
        is_eager=True,
        help="Log verbosity (JSON lines when not on a terminal).",
    )


def broker_option(default: str = "mqtt://127.0.0.1:1883") -> Callable[[F], F]:
    return click.option(
        "--broker",
        default=default,
        show_default=True,
        envvar="DRFMESOS_BROKER",
        help="mqtt://[user:pass@]host:port, or 'embedded' (in-process amqtt) "
        "or 'mosquitto' (a local mosquitto) to start one.",
    )


def cluster_option(func: F) -> F:
    return click.option(
        "--cluster",
        default="default",
        show_default=True,
        envvar="DRFMESOS_CLUSTER",
        help="Cluster name: the topic prefix, so clusters can share a broker.",
    )(func)


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
