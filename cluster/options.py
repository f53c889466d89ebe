"""Options every drfmesos command shares."""

from __future__ import annotations

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
