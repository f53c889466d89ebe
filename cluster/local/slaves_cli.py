"""`drfmesos slaves gone ID`: an operator tells the master a slave is gone for good."""

from __future__ import annotations

import click

from cluster.local.operator_cli import _call
from protocol.tooling.cli import broker_option, cluster_option, log_level_default
from protocol.wire.messages import MarkSlaveGone


@click.group()
def slaves() -> None:
    """Operators' calls about slaves on a running master."""


@slaves.command("gone")
@broker_option()
@cluster_option
@click.argument("slave_id")
@click.option("--timeout", type=float, default=10.0, show_default=True)
@log_level_default("warning")
def slaves_gone(broker: str, cluster: str, slave_id: str, timeout: float) -> None:
    """Mark SLAVE_ID gone (Mesos's MARK_AGENT_GONE): its tasks end TASK_GONE_BY_OPERATOR
    (TASK_LOST for frameworks not partition-aware) and it may not re-register. Say it only
    of a slave you know is down: tasks still running there are killed if it returns."""
    _call(
        broker,
        cluster,
        MarkSlaveGone(slave_id=slave_id),
        lambda e: e.kind == "slave-gone" and e.slave_id == slave_id,
        timeout,
    )
    click.echo(f"slave {slave_id} marked gone")
