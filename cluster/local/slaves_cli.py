"""`drfmesos slaves gone ID`: an operator tells the master a slave is gone for good;
`drfmesos slaves drain ID`, `deactivate ID`, `reactivate ID`: takes one out of the offers
for maintenance and back (Mesos 1.9's DRAIN_AGENT, DEACTIVATE_AGENT, REACTIVATE_AGENT)."""

from __future__ import annotations

import click

from cluster.local.operator_cli import _call
from protocol.tooling.cli import broker_option, cluster_option, log_level_default, timeout_option
from protocol.wire.messages import DeactivateSlave, DrainSlave, MarkSlaveGone, ReactivateSlave


@click.group()
def slaves() -> None:
    """Operators' calls about slaves on a running master."""


@slaves.command("gone")
@broker_option()
@cluster_option
@click.argument("slave_id")
@timeout_option
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


@slaves.command("drain")
@broker_option()
@cluster_option
@click.argument("slave_id")
@click.option(
    "--grace-period",
    type=click.FloatRange(min=0),
    default=None,
    help="Seconds between SIGTERM and SIGKILL at most, over each task's own kill policy "
    "[default: each task's own]",
)
@click.option("--mark-gone", is_flag=True, help="Once drained, mark it gone: it may not come back.")
@timeout_option
@log_level_default("warning")
def slaves_drain(
    broker: str,
    cluster: str,
    slave_id: str,
    grace_period: float | None,
    mark_gone: bool,
    timeout: float,
) -> None:
    """Drain SLAVE_ID for maintenance: offered to no one from now, each of its tasks killed
    (SIGTERM, then SIGKILL after its grace, at most --grace-period), and DRAINED once they
    have ended and their frameworks heard it (`drfmesos state` says). Then, with
    --mark-gone, it is marked gone; else `drfmesos slaves reactivate` brings it back."""
    message = DrainSlave(slave_id=slave_id, max_grace_period=grace_period, mark_gone=mark_gone)
    _call(
        broker,
        cluster,
        message,
        lambda e: e.kind == "slave-draining" and e.slave_id == slave_id,
        timeout,
    )
    click.echo(f"slave {slave_id} draining")


@slaves.command("deactivate")
@broker_option()
@cluster_option
@click.argument("slave_id")
@timeout_option
@log_level_default("warning")
def slaves_deactivate(broker: str, cluster: str, slave_id: str, timeout: float) -> None:
    """Offer SLAVE_ID to no one (its outstanding offers rescinded); its tasks run on."""
    _call(
        broker,
        cluster,
        DeactivateSlave(slave_id=slave_id),
        lambda e: e.kind == "slave-deactivated" and e.slave_id == slave_id,
        timeout,
    )
    click.echo(f"slave {slave_id} deactivated")


@slaves.command("reactivate")
@broker_option()
@cluster_option
@click.argument("slave_id")
@timeout_option
@log_level_default("warning")
def slaves_reactivate(broker: str, cluster: str, slave_id: str, timeout: float) -> None:
    """Offer SLAVE_ID again: a deactivated or DRAINED slave (not one still DRAINING)."""
    _call(
        broker,
        cluster,
        ReactivateSlave(slave_id=slave_id),
        lambda e: e.kind == "slave-reactivated" and e.slave_id == slave_id,
        timeout,
    )
    click.echo(f"slave {slave_id} reactivated")
