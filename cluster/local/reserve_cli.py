"""`drfmesos reserve`, `drfmesos unreserve` and `drfmesos volumes
create|destroy|grow|shrink`: an operator's calls on whose a slave's free resources are
(Mesos's RESERVE_RESOURCES, UNRESERVE_RESOURCES, CREATE_VOLUMES, DESTROY_VOLUMES,
GROW_VOLUME, SHRINK_VOLUME), over the bus."""

from __future__ import annotations

import click
from pydantic import ValidationError

from cluster.local.operator_cli import _call
from protocol.tooling.cli import broker_option, cluster_option, log_level_default, timeout_option
from protocol.wire.codec import describe_validation
from protocol.wire.messages import ClusterEvent, OfferOperation, OperateResources
from protocol.wire.reservations import ReservationError, as_dynamic
from protocol.wire.resources import ResourceError, Resources

RESOURCES_HELP = (
    "Resources in Mesos's text form, with whose they are: cpus(team-a):2;mem(team-a):1024 "
    "(reserve), as the slave's state shows them (unreserve), disk(team-a,ops)[id:path]:512 "
    "(volumes)."
)


def _operate(
    broker: str,
    cluster: str,
    slave_id: str,
    kind: str,
    text: str,
    timeout: float,
    **resize: Resources | float,
) -> None:
    try:
        resources = Resources.parse(text)
        if kind == "RESERVE":  # cpus(team-a) here means: reserved for team-a, by me
            resources = Resources.from_millis(as_dynamic(resources.millis))
        operation = OfferOperation(type=kind, resources=resources, **resize)
    except ValidationError as e:
        raise click.BadParameter(describe_validation(e), param_hint="RESOURCES") from None
    except (ResourceError, ReservationError, ValueError) as e:
        raise click.BadParameter(str(e).splitlines()[-1], param_hint="RESOURCES") from None

    made: list[Resources] = []  # (what the master's event says it made)

    def done(e: ClusterEvent) -> bool:
        if e.kind != kind.lower() or e.slave_id != slave_id:
            return False
        made.append(e.resources)
        return True

    _call(broker, cluster, OperateResources(slave_id=slave_id, operation=operation), done, timeout)
    # a reservation or volume made is said as the slave's state names it (its principal
    # the operator's: how `unreserve` and `volumes destroy` name it); what went, as named
    said = made[-1] if made and kind in ("RESERVE", "CREATE") else operation.resources
    click.echo(f"{kind.lower()}: {said} on slave {slave_id}")


def _command(kind: str, doc: str) -> click.Command:
    @broker_option()
    @cluster_option
    @click.argument("slave_id")
    @click.argument("resources", metavar="RESOURCES")
    @timeout_option
    @log_level_default("warning")
    def command(broker: str, cluster: str, slave_id: str, resources: str, timeout: float) -> None:
        _operate(broker, cluster, slave_id, kind, resources, timeout)

    command.__doc__ = doc + "\n\n" + RESOURCES_HELP
    return click.command(kind.lower())(command)


reserve = _command(
    "RESERVE",
    "Reserve free resources of SLAVE_ID for a role, in this operator's name: offered to "
    "that role's frameworks (and its sub-roles') alone.",
)
unreserve = _command("UNRESERVE", "Give back a dynamic reservation: anybody's again.")


@click.group()
def volumes() -> None:
    """Persistent volumes on a slave's reserved disk (an operator's calls)."""


volumes.add_command(
    _command("CREATE", "Make persistent volumes on reserved disk of SLAVE_ID."), "create"
)
volumes.add_command(
    _command(
        "DESTROY", "End persistent volumes (none a live task uses): their disk stays reserved."
    ),
    "destroy",
)


@volumes.command("grow")
@broker_option()
@cluster_option
@click.argument("slave_id")
@click.argument("volume", metavar="VOLUME")
@click.argument("addition", metavar="ADDITION")
@timeout_option
@log_level_default("warning")
def grow(
    broker: str, cluster: str, slave_id: str, volume: str, addition: str, timeout: float
) -> None:
    """Grow a persistent volume of SLAVE_ID (none a live task uses) by free disk of its
    own reservation: VOLUME as the slave's state shows it, disk(team-a,ops)[id:path]:512;
    ADDITION the disk to add, disk(team-a,ops):256. Its data stays."""
    try:
        more = Resources.parse(addition)
    except (ResourceError, ReservationError) as e:
        raise click.BadParameter(str(e), param_hint="ADDITION") from None
    _operate(broker, cluster, slave_id, "GROW_VOLUME", volume, timeout, addition=more)


@volumes.command("shrink")
@broker_option()
@cluster_option
@click.argument("slave_id")
@click.argument("volume", metavar="VOLUME")
@click.argument("subtract", type=float)
@timeout_option
@log_level_default("warning")
def shrink(
    broker: str, cluster: str, slave_id: str, volume: str, subtract: float, timeout: float
) -> None:
    """Shrink a persistent volume of SLAVE_ID (none a live task uses) by SUBTRACT MB
    (less than its size): VOLUME as the slave's state shows it. The disk it gives up
    stays reserved as the volume's was."""
    _operate(broker, cluster, slave_id, "SHRINK_VOLUME", volume, timeout, subtract=subtract)
