"""The `drfmesos` command: one entry point, a subcommand per party and tool."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TypeVar

import click

from protocol import logs

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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(VERSION, prog_name="drfmesos")
def main() -> None:
    """drfmesos: a Mesos-style resource-offer cluster manager with Dominant Resource
    Fairness, over MQTT.

    Run a master, slaves and frameworks against one broker, or `drfmesos demo` for a
    whole cluster on this machine.
    """


@main.command()
@click.option(
    "--kind", type=click.Choice(["embedded", "mosquitto"]), default="embedded", show_default=True
)
@click.option("--port", type=int, default=1883, show_default=True)
@log_level_option
def broker(kind: str, port: int) -> None:
    """Run a broker on 127.0.0.1 (embedded amqtt or a local mosquitto)."""
    from cluster.runner import until_signalled
    from protocol.brokers import EmbeddedBroker, MosquittoBroker

    async def run() -> None:
        b: EmbeddedBroker | MosquittoBroker = (
            EmbeddedBroker(port) if kind == "embedded" else MosquittoBroker(port)
        )
        await b.start()
        click.echo(f"broker listening on {b.url}", err=True)
        try:
            await until_signalled()
        finally:
            await b.stop()

    asyncio.run(run())


def _register_commands() -> None:
    from master.cli import master, state

    main.add_command(master)
    main.add_command(state)


_register_commands()
