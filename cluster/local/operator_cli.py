"""An operator's calls on a running master (`drfmesos teardown`, `drfmesos quota ...`,
`drfmesos weights ...`), its event stream (`drfmesos events`), and `drfmesos roles ...`
for the roles file."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from protocol.tooling.cli import (
    broker_option,
    broker_url,
    cluster_option,
    log_level_default,
    timeout_option,
)
from protocol.transport.base import BrokerUnreachable, BusClosed
from protocol.wire.messages import ClusterEvent, SetQuota, SetWeights, Teardown, Wire
from protocol.wire.resources import Limit, ResourceError, Resources

R = TypeVar("R", bound=Resources)


@click.group()
def quota() -> None:
    """Set or clear a role's quota on a running master (an operator principal's call)."""


def _resources(text: str | None, what: str, kind: type[R]) -> R | None:
    """`kind` Limit keeps zeros: `--limit cpus:0` allows no cpus, it does not drop them."""
    if text is None:
        return None
    try:
        parsed = kind.parse(text.replace(",", ";"))
        parsed.check_spelling()
        return parsed
    except ResourceError as e:
        raise click.BadParameter(str(e), param_hint=what) from None


def _call(
    broker: str,
    cluster: str,
    message: Wire,
    done: Callable[[ClusterEvent], bool],
    timeout: float,
) -> None:
    """Make the call as the operator the options name; fail with the master's words."""
    from cluster.local.reaching import CONNECT_TRIES, run_command
    from cluster.local.view import operator_call

    url = broker_url(broker)
    call = operator_call(url, cluster, message, done, timeout, tries=CONNECT_TRIES)
    why = run_command(url, cluster, call, awaited="answered the call", timeout=timeout)
    if why:
        raise click.ClickException(why)


def _quota_set(role: str) -> Callable[[ClusterEvent], bool]:
    return lambda e: e.kind == "quota" and e.detail.split(":", 1)[0] == role


@click.command()
@broker_option()
@cluster_option
@click.option("--json", "as_json", is_flag=True, help="Each event as a JSON object, a line each.")
@click.option("--seconds", type=float, default=None, help="Stop after this long (else Ctrl-C).")
@log_level_default("warning")
def events(broker: str, cluster: str, as_json: bool, seconds: float | None) -> None:
    """Follow the master's event stream, a line an event (an operator principal's lease
    on it, renewed while this runs and taken again from a new leader)."""
    from cluster.local.events import event_line, follow_events
    from cluster.local.reaching import CONNECT_TRIES, bus_failure
    from protocol.tooling.cli import signals_set
    from protocol.wire.messages import Error

    stop = asyncio.Event()

    def show(event: ClusterEvent) -> None:
        line = json.dumps(event.model_dump(mode="json")) if as_json else event_line(event)
        try:
            click.echo(line)
        except BrokenPipeError:  # (`drfmesos events | head`): its reader is gone, stop
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (no flush error)
            stop.set()

    def refused(error: Error) -> None:
        click.echo(f"the master refused the lease: {error.code}: {error.message}", err=True)

    gave_up: list[str] = []

    def dropped() -> None:  # (nothing would come of following on)
        gave_up.append(
            "the broker keeps dropping the connection: a second connection as the same "
            "principal takes the first one's over (give this one a principal of its own)"
        )
        stop.set()

    def missed(count: int) -> None:
        click.echo(
            f"{count:,} events missed here: this follower fell behind and the broker "
            "dropped what it held for it past its bound",
            err=True,
        )

    async def follow() -> None:
        with signals_set(stop):
            if seconds is not None:
                asyncio.get_running_loop().call_later(seconds, stop.set)
            await follow_events(
                url, cluster, show, stop, on_refused=refused, on_dropped=dropped,
                on_missed=missed, tries=CONNECT_TRIES,
            )  # fmt: skip

    url = broker_url(broker)
    try:
        asyncio.run(follow())
    except (BrokerUnreachable, BusClosed) as e:
        raise click.ClickException(bus_failure(e, url)) from None
    if gave_up:
        raise click.ClickException(gave_up[0])


@click.command()
@broker_option()
@cluster_option
@click.argument("framework_id")
@timeout_option
@log_level_default("warning")
def teardown(broker: str, cluster: str, framework_id: str, timeout: float) -> None:
    """Tear a framework down (an operator principal's call): its tasks are killed.
    FRAMEWORK_ID is its id, as Mesos's teardown takes (`drfmesos state` lists them)."""
    from cluster.local.view import removed

    try:
        _call(broker, cluster, Teardown(framework_id=framework_id), removed(framework_id), timeout)
    except click.ClickException as e:
        if e.message.startswith("unknown-framework"):  # (a name given for its id, say)
            e.message += (
                " (teardown takes a framework's id, not its name: `drfmesos state` lists "
                "each framework's id beside its name)"
            )
        raise
    click.echo(f"framework {framework_id} torn down")


@quota.command("set")
@broker_option()
@cluster_option
@click.argument("role")
@click.option("--guarantee", default=None, help="e.g. cpus:4,mem:8192")
@click.option(
    "--limit",
    default=None,
    help="e.g. cpus:10 (resources not named: no limit; cpus:0 freezes the role's cpus)",
)
@timeout_option
@log_level_default("warning")
def quota_set(
    broker: str, cluster: str, role: str, guarantee: str | None, limit: str | None, timeout: float
) -> None:
    """Give ROLE a guarantee and/or a limit (Mesos 1.9 quota)."""
    if guarantee is None and limit is None:
        raise click.UsageError("give --guarantee, --limit or both (quota remove clears it)")
    message = SetQuota(
        role=role,
        guarantee=_resources(guarantee, "--guarantee", Resources) or Resources(),
        limit=_resources(limit, "--limit", Limit),
    )
    _call(broker, cluster, message, _quota_set(role), timeout)
    click.echo(f"quota of {role} set")


@quota.command("remove")
@broker_option()
@cluster_option
@click.argument("role")
@timeout_option
@log_level_default("warning")
def quota_remove(broker: str, cluster: str, role: str, timeout: float) -> None:
    """Clear ROLE's quota."""
    _call(broker, cluster, SetQuota(role=role), _quota_set(role), timeout)
    click.echo(f"quota of {role} cleared")


@click.group()
def weights() -> None:
    """Roles' weights on a running master (Mesos's /weights): only operators set them."""


@weights.command("set")
@broker_option()
@cluster_option
@click.argument("assignments")
@timeout_option
@log_level_default("warning")
def weights_set(broker: str, cluster: str, assignments: str, timeout: float) -> None:
    """Set roles' weights: ROLE=W[,ROLE=W...] (any node of the role tree)."""
    from master.cli import parse_weights

    chosen = parse_weights(assignments)
    try:
        message = SetWeights(weights=chosen)
    except ValueError as e:  # (pydantic's ValidationError: a role name too long)
        raise click.BadParameter(str(e).splitlines()[-1], param_hint="ASSIGNMENTS") from None
    _call(broker, cluster, message, lambda e: e.kind == "weights", timeout)
    click.echo("weights set: " + ", ".join(f"{r}={w:g}" for r, w in chosen.items()))


@weights.command("list")
@broker_option()
@cluster_option
@timeout_option
@log_level_default("warning")
def weights_list(broker: str, cluster: str, timeout: float) -> None:
    """Every role's weight and promise, as the master's state shows them."""
    from cluster.local.reaching import CONNECT_TRIES, run_command
    from cluster.local.view import fetch_state

    url = broker_url(broker)
    read = fetch_state(url, cluster, timeout, tries=CONNECT_TRIES)
    snap = run_command(url, cluster, read, awaited="published its state", timeout=timeout)
    for r in snap.roles:
        promise = "" if r.promise is None else f"  (promised {r.promise:.1%})"
        click.echo(f"{r.role}={r.weight:g}{promise}")


@click.group()
def roles() -> None:
    """The roles file: its schema, and checking one."""


@roles.command("schema")
def roles_schema() -> None:
    """The roles file's JSON schema."""
    from master.roles_file import schema

    click.echo(json.dumps(schema(), indent=2))


@roles.command("check")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--policy",
    default="hdrf",
    show_default=True,
    help="The master's --policy: on a tree of roles, a role's guarantee includes its sub-roles'.",
)
def roles_check(path: Path, policy: str) -> None:
    """Check a roles file, naming the field of anything wrong, as a master with this
    policy would take it."""
    from master.allocation.allocator import Allocator, AllocatorError
    from master.roles_file import RolesError, load_roles

    try:
        loaded = load_roles(path)
        Allocator(policy).roles.apply(loaded.roles)  # what the master does with it
    except (RolesError, AllocatorError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"{path}: {len(loaded.roles)} roles, fine")
