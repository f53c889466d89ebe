"""The `drfmesos` command: one entry point, a subcommand per party and tool."""

from __future__ import annotations

import asyncio
import difflib
import importlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from protocol import logs
from protocol.extras import MissingExtra
from protocol.tooling.cli import (
    VERSION,
    broker_option,
    broker_url,
    cluster_option,
    log_level_default,
    log_level_option,
    timeout_option,
)
from protocol.wire.codec import describe_validation

PIPED_WIDTH = 1000  # `state`'s width when stdout is not a terminal: the tables' own


class Commands(click.Group):
    """The drfmesos command: an optional part that is not installed is an error that says
    which extra brings it, and a value a call cannot carry (an id past its length, a
    grace past its bound: the message's own checks) an error that says which and why --
    not a traceback.

    Each subcommand's module is imported when it is named (`SUBCOMMANDS`): a slave
    process -- started by the thousand in a benchmark -- imports what `slave` needs, not
    the experiments, the master and the operator's tools (0.3 s of CPU, against 0.9 s)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        load = SUBCOMMANDS.get(cmd_name)
        return None if load is None else load()

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """An unknown command says which one was likely meant: a typo's nearest, or
        Mesos's word for it (`agent` is `slave` here)."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and name not in SUBCOMMANDS:
            if (ours := MESOS_WORDS.get(name)) is not None:
                ctx.fail(f"No such command {name!r}: Mesos's {name} is {ours!r} here.")
            if like := difflib.get_close_matches(name, list(SUBCOMMANDS), n=1):
                ctx.fail(f"No such command {name!r}. Did you mean {like[0]!r}?")
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MissingExtra as e:
            raise click.ClickException(str(e)) from None
        except ValidationError as e:
            raise click.ClickException(f"invalid value: {describe_validation(e)}") from None


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(VERSION, prog_name="drfmesos")
def main() -> None:
    """drfmesos: a Mesos-style resource-offer cluster manager with Dominant Resource
    Fairness, over MQTT.

    Run a master, slaves and frameworks against one broker, or `drfmesos demo` for a
    whole cluster on this machine.
    """


@click.command()
@click.option(
    "--kind",
    type=click.Choice(["embedded", "mosquitto"]),
    default="embedded",
    show_default=True,
    help="embedded: amqtt in this process (nothing to install); mosquitto: a local "
    "mosquitto this command starts and stops.",
)
@click.option(
    "--port",
    type=int,
    default=1883,
    show_default=True,
    help="The port it listens on, on 127.0.0.1.",
)
@click.option(
    "--auth",
    "auth_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="A credentials store (drfmesos auth init): passwords, ACLs, one client per principal.",
)
@click.option("--tls", is_flag=True, help="TLS on the port, with the store's certificate.")
@log_level_option
def broker(kind: str, port: int, auth_dir: Path | None, tls: bool) -> None:
    """Run a broker on 127.0.0.1 (embedded amqtt or a local mosquitto)."""
    from protocol.tooling.brokers import EmbeddedBroker, MosquittoBroker
    from protocol.tooling.cli import signals_set

    if tls and auth_dir is None:
        raise click.BadParameter("--tls uses the store's certificate: give --auth too")

    async def run() -> None:
        b: EmbeddedBroker | MosquittoBroker = (
            EmbeddedBroker(port, auth=auth_dir, tls=tls)
            if kind == "embedded"
            else MosquittoBroker(port, auth=auth_dir, tls=tls)
        )
        stop = asyncio.Event()
        # (set before it says it listens: a Ctrl-C at once is its stop, not a traceback)
        with signals_set(stop):
            await b.start()
            watch = asyncio.create_task(_reload_on_change(b, auth_dir, stop))
            try:
                click.echo(f"broker listening on {b.url}", err=True)
                if auth_dir is None:
                    log.warning("insecure", detail="no --auth: anyone who reaches it is anyone")
                await stop.wait()
            finally:
                watch.cancel()
                await b.stop()
                if isinstance(b, MosquittoBroker):
                    b.cleanup()  # (its temp dir: config, and what it persisted)

    asyncio.run(run())


async def _reload_on_change(b: object, auth_dir: Path | None, stop: asyncio.Event) -> None:
    """mosquitto re-reads its password and ACL files on SIGHUP; send one when they change
    (the embedded broker's plugins look for themselves)."""
    from protocol.tooling.brokers import MosquittoBroker

    if auth_dir is None or not isinstance(b, MosquittoBroker):
        return
    files = [auth_dir / "passwd", auth_dir / "acl"]

    def stamp() -> list[int]:
        return [f.stat().st_mtime_ns if f.exists() else 0 for f in files]

    seen = await asyncio.to_thread(stamp)
    while not stop.is_set():
        await asyncio.sleep(1.0)
        now = await asyncio.to_thread(stamp)
        if now != seen:
            seen = now
            b.reload()
            log.info("broker.reloaded", store=str(auth_dir))


@click.command()
@broker_option()
@cluster_option
@click.option("--json", "as_json", is_flag=True, help="Print the raw snapshot as JSON.")
@timeout_option
@log_level_default("warning")
def state(broker: str, cluster: str, as_json: bool, timeout: float) -> None:
    """Print the master's latest state snapshot (frameworks, slaves, shares)."""
    from cluster.local.reaching import CONNECT_TRIES, run_command
    from cluster.local.view import fetch_state, render_state

    url = broker_url(broker)
    read = fetch_state(url, cluster, timeout, tries=CONNECT_TRIES)
    snap = run_command(url, cluster, read, awaited="published its state", timeout=timeout)
    if as_json:
        click.echo(json.dumps(snap.model_dump(mode="json"), indent=2))
    else:
        from rich.console import Console

        # a terminal's width, else (piped, redirected) as wide as the tables are: a pipe
        # is read by a program or a file, and a cut column ("princ…") helps neither
        tty = sys.stdout.isatty()
        Console(width=None if tty else PIPED_WIDTH).print(render_state(snap))


log = logs.get("broker")


def _from(module: str, name: str) -> Callable[[], click.Command]:
    def load() -> click.Command:
        command: click.Command = getattr(importlib.import_module(module), name)
        return command

    return load


def _framework() -> click.Command:
    """`drfmesos framework`, with the experiment runner's own framework among its kinds."""
    from cluster.experiments.framework import experiment_framework
    from frameworks.cli import framework

    if experiment_framework.name not in framework.commands:
        framework.add_command(experiment_framework)
    return framework


# a Mesos user's word for a command, and ours
MESOS_WORDS = {
    "agent": "slave",
    "agents": "slaves",
    "mesos-execute": "run",
    "maintenance": "slaves",
}

SUBCOMMANDS: dict[str, Callable[[], click.Command]] = {
    "auth": _from("cluster.local.auth_cli", "auth"),
    "broker": lambda: broker,
    "demo": _from("cluster.local.demo", "demo"),
    "events": _from("cluster.local.operator_cli", "events"),
    "experiment": _from("cluster.experiments.cli", "experiment"),
    "framework": _framework,
    "ideal": _from("cluster.experiments.ideal_cli", "ideal_command"),
    "master": _from("master.cli", "master"),
    "quota": _from("cluster.local.operator_cli", "quota"),
    "reserve": _from("cluster.local.reserve_cli", "reserve"),
    "roles": _from("cluster.local.operator_cli", "roles"),
    "run": _from("cluster.local.run_cli", "run"),
    "simulate": _from("cluster.experiments.cli", "simulate"),
    "slave": _from("slave.cli", "slave"),
    "slaves": _from("cluster.local.slaves_cli", "slaves"),
    "state": lambda: state,
    "teardown": _from("cluster.local.operator_cli", "teardown"),
    "unreserve": _from("cluster.local.reserve_cli", "unreserve"),
    "volumes": _from("cluster.local.reserve_cli", "volumes"),
    "weights": _from("cluster.local.operator_cli", "weights"),
    "why": _from("cluster.local.why_cli", "why"),
}


if __name__ == "__main__":
    main()
