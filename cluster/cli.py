"""The `drfmesos` command: one entry point, a subcommand per party and tool."""

from __future__ import annotations

import asyncio

import click

from cluster.demo import demo
from cluster.experiment_cli import experiment, simulate
from cluster.options import VERSION, log_level_option
from frameworks.cli import framework
from master.cli import master, state
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


main.add_command(master)
main.add_command(state)
main.add_command(slave)
main.add_command(framework)
main.add_command(demo)
main.add_command(simulate)
main.add_command(experiment)


if __name__ == "__main__":
    main()
