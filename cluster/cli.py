"""The `drfmesos` command: one entry point, a subcommand per party and tool."""

from __future__ import annotations

import asyncio
import json

import click

from cluster.demo import demo
from cluster.experiment_cli import experiment, simulate
from cluster.experiment_framework import experiment_framework
from frameworks.cli import framework
from master.cli import master
from protocol.brokers import BrokerURL
from protocol.cli import (
    VERSION,
    broker_option,
    cluster_option,
    log_level_default,
    log_level_option,
)
from slave.cli import slave


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
    from protocol.brokers import EmbeddedBroker, MosquittoBroker
    from protocol.cli import until_signalled

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


@main.command()
@broker_option()
@cluster_option
@click.option("--json", "as_json", is_flag=True, help="Print the raw snapshot as JSON.")
@click.option("--timeout", type=float, default=10.0, show_default=True)
@log_level_default("warning")
def state(broker: str, cluster: str, as_json: bool, timeout: float) -> None:
    """Print the master's latest state snapshot (frameworks, slaves, shares)."""
    from cluster.view import fetch_state, render_state

    try:
        snap = asyncio.run(fetch_state(BrokerURL.parse(broker), cluster, timeout))
    except TimeoutError:
        raise click.ClickException(
            f"no state from a master on {broker} (cluster {cluster!r}) within {timeout}s"
        ) from None
    if as_json:
        click.echo(json.dumps(snap.model_dump(mode="json"), indent=2))
    else:
        from rich.console import Console

        Console().print(render_state(snap))


main.add_command(master)
main.add_command(slave)
framework.add_command(experiment_framework)  # the experiment runner's own framework
main.add_command(framework)
main.add_command(demo)
main.add_command(simulate)
main.add_command(experiment)


if __name__ == "__main__":
    main()
