"""What every drfmesos command shares: its options, and running a party until a signal."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from collections.abc import Callable, Coroutine, Iterator
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TypeVar

import click

from protocol import logs
from protocol.tooling.brokers import BrokerError, BrokerURL, open_broker
from protocol.transport.bus import BusRefused

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
    """`--broker`, with `--ca` and `--secret-file` beside it (read by `broker_url`)."""

    def remember(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        ctx.meta[f"drfmesos.{param.name}"] = value
        return value

    def decorate(func: F) -> F:
        func = click.option(
            "--secret-file",
            type=click.Path(dir_okay=False),
            default=None,
            envvar="DRFMESOS_SECRET_FILE",
            expose_value=False,
            callback=remember,
            help="A file holding this principal's secret (keeps it out of process listings).",
        )(func)
        func = click.option(
            "--ca",
            type=click.Path(dir_okay=False),
            default=None,
            envvar="DRFMESOS_CA",
            expose_value=False,
            callback=remember,
            help="With mqtts://: the CA certificate that signed the broker's (the store's ca.pem).",
        )(func)
        return click.option(
            "--broker",
            default=default,
            show_default=True,
            envvar="DRFMESOS_BROKER",
            help="mqtt[s]://[principal[:secret]@]host:port, or 'embedded' (in-process amqtt) "
            "or 'mosquitto' (a local mosquitto) to start one.",
        )(func)

    return decorate


def broker_url(broker: str) -> BrokerURL:
    """The URL `--broker` names, with `--ca` and `--secret-file` applied: a usage error
    naming the option whose value is wrong (a secret file or a CA that cannot be read)."""
    extras = broker_extras()
    try:
        url = BrokerURL.parse(broker, **extras)
    except BrokerError as e:
        wrong = "--secret-file" if str(e).startswith("cannot read the secret file") else "--broker"
        raise click.BadParameter(str(e), param_hint=wrong) from None
    if url.tls and url.ca is not None:
        try:
            url.ssl_context()
        except BrokerError as e:
            raise click.BadParameter(str(e), param_hint="--ca") from None
    return url


def broker_extras() -> dict[str, str | None]:
    ctx = click.get_current_context(silent=True)
    meta = ctx.meta if ctx else {}
    return {"ca": meta.get("drfmesos.ca"), "secret_file": meta.get("drfmesos.secret_file")}


def timeout_option(func: F) -> F:
    """`--timeout` of an operator's command: how long it waits for the master, once it
    has reached the broker (it does not wait for a broker: see cluster.local.reaching)."""
    return click.option(
        "--timeout",
        type=float,
        default=10.0,
        show_default=True,
        help="Seconds to wait for the master's answer once the broker is reached; then "
        "the command says no master answered.",
    )(func)


def cluster_option(func: F) -> F:
    return click.option(
        "--cluster",
        default="default",
        show_default=True,
        envvar="DRFMESOS_CLUSTER",
        help="Cluster name: the topic prefix, so clusters can share a broker.",
    )(func)


@contextlib.contextmanager
def signals_set(stop: asyncio.Event) -> Iterator[None]:
    """SIGINT and SIGTERM set `stop` from now until the block ends (then they act as
    they would without us again)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        yield
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)


async def until_signalled(stop: asyncio.Event | None = None) -> None:
    """Wait for SIGINT or SIGTERM (or `stop`)."""
    stop = stop or asyncio.Event()
    with signals_set(stop):
        await stop.wait()


def run_party(broker: str, party: Callable[[BrokerURL], Coroutine[Any, Any, None]]) -> None:
    """Open the broker (starting one for `embedded`/`mosquitto`) and run `party` on it.

    `party` runs until it returns or until SIGINT/SIGTERM, which cancels it so that its
    own `finally`/`async with` blocks shut it down cleanly.
    """

    extras = broker_extras()
    steady_collector()

    async def main() -> None:
        async with open_broker(broker, **extras) as url:
            stop = asyncio.Event()
            # the handlers are set before the party's first step: a signal as soon as it
            # logs anything is its stop, not the default end of the process
            with signals_set(stop):
                task = asyncio.create_task(party(url))
                signalled = asyncio.create_task(stop.wait())
                done, _ = await asyncio.wait({task, signalled}, return_when=asyncio.FIRST_COMPLETED)
            for t in (task, signalled):
                if not t.done():
                    t.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await t
            if task in done:
                task.result()  # re-raise a party's failure

    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(main())
    except BusRefused as e:
        raise click.ClickException(str(e)) from None


# Objects made between two young collections (CPython's default is 700). A party makes
# some tens of short-lived objects a message; at the default, the slaves' process of e2e
# ran a collection every fraction of a millisecond's work and its survivors' older ones
# (10% of its CPU, the master's 7%); at this, about half of that.
YOUNG_COLLECTION_EVERY = 20_000


def steady_collector() -> None:
    """A party's process, once its imports are done: what exists now (modules, classes,
    schemas: lives as long as the process) is moved out of the collector's sight
    (`gc.freeze`), so that its full collections walk only what the party made since, and
    young collections come every YOUNG_COLLECTION_EVERY objects. Only a drfmesos
    command's own process: the SDK leaves a framework author's process as it is."""
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, older, oldest)


def warn_if_insecure(url: BrokerURL, party: str) -> None:
    """A party that connects without credentials says so, loudly, once."""
    if not url.username:
        logs.get(party).warning(
            "insecure",
            detail="connected without credentials: anyone who reaches the broker can act as "
            "any party (see `drfmesos auth`)",
        )
    elif not url.tls:
        logs.get(party).warning(
            "plaintext", detail="credentials and calls cross the network unencrypted (mqtts://)"
        )
