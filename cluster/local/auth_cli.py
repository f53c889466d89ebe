"""`drfmesos auth ...`: a cluster's credentials store (see `protocol.tooling.credentials`)."""

from __future__ import annotations

from pathlib import Path

import click

from protocol.tooling.credentials import KINDS, CredentialsError, Store
from protocol.tooling.operation_grants import OPERATIONS, default

store_dir = click.argument("directory", type=click.Path(file_okay=False, path_type=Path))


@click.group()
def auth() -> None:
    """Make and change a credentials store: principals, their secrets' hashes, the broker's
    ACL and TLS certificate."""


def _fail(e: CredentialsError) -> click.ClickException:
    return click.ClickException(str(e))


@auth.command("init")
@store_dir
@click.option(
    "--hostname",
    "hostnames",
    multiple=True,
    help="A name clients use for the broker, for its TLS certificate (localhost and "
    "127.0.0.1 are always in it); repeat for more.",
)
def init(directory: Path, hostnames: tuple[str, ...]) -> None:
    """Create an empty store: password file, ACL, a CA and the broker's certificate."""
    try:
        Store.init(directory, hostnames)
    except CredentialsError as e:
        raise _fail(e) from None
    click.echo(f"credentials store in {directory}; the broker's CA is {directory / 'ca.pem'}")


@auth.command("add")
@store_dir
@click.argument("name")
@click.option(
    "--kind",
    type=click.Choice(KINDS),
    required=True,
    help="What it may do: run a master, a slave, frameworks (in its --roles), or an "
    "operator's calls (state, weights, quota, drains).",
)
@click.option(
    "--roles",
    default="",
    help="Framework principals: the roles it may register in, r1,r2 (default: its name).",
)
@click.option(
    "--reserve",
    is_flag=True,
    help="Framework principals: it may reserve resources for its roles (RESERVE) and make "
    "volumes on them, which holds them from every other role (Mesos's reserve_resources "
    "ACL). Off by default: a tenant reserving an idle cluster would keep it from the rest.",
)
@click.option(
    "--secret-file",
    is_flag=True,
    help="Also keep the secret in DIRECTORY/secrets/NAME (mode 0600), for --secret-file.",
)
def add(
    directory: Path, name: str, kind: str, roles: str, reserve: bool, secret_file: bool
) -> None:
    """Add a principal; its new secret is the last line printed (kept only with
    --secret-file; the store keeps its hash)."""
    try:
        store = Store.open(directory)
        secret = store.add(
            name,
            kind,
            tuple(r.strip() for r in roles.split(",") if r.strip()),
            keep_secret=secret_file,
            reserve=reserve,
        )
    except CredentialsError as e:
        raise _fail(e) from None
    click.echo(f"added {kind} principal {name}; its secret:", err=True)
    click.echo(secret)


@auth.command("reserve")
@store_dir
@click.argument("name")
@click.option("--off", is_flag=True, help="Take the grant back.")
def reserve(directory: Path, name: str, off: bool) -> None:
    """Let framework principal NAME reserve resources for its roles (RESERVE), or no
    longer (--off); a running master reads it within 2 s. Reservations it made stay."""
    try:
        Store.open(directory).may_reserve(name, not off)
    except CredentialsError as e:
        raise _fail(e) from None
    click.echo(f"{name} {'may no longer' if off else 'may'} reserve resources")


@auth.command("grant")
@store_dir
@click.argument("name")
@click.argument("operation", type=click.Choice(OPERATIONS))
@click.option(
    "--role",
    "roles",
    multiple=True,
    help="Only on resources reserved for this role (repeat for more); none: for any role.",
)
def grant(directory: Path, name: str, operation: str, roles: tuple[str, ...]) -> None:
    """Let principal NAME (a framework's or an operator's) make OPERATION: reserve,
    unreserve, create-volume, destroy-volume or resize-volume (GROW_VOLUME and
    SHRINK_VOLUME), as Mesos's reserve_resources, ... resize_volume ACLs. A framework
    still acts only in its offer's role, unreserves only what its principal reserved. A
    running master reads it within 2 s."""
    try:
        Store.open(directory).grant(name, operation, True, roles)
    except CredentialsError as e:
        raise _fail(e) from None
    where = f" for {', '.join(roles)}" if roles else ""
    click.echo(f"{name} may {operation}{where}")


@auth.command("revoke")
@store_dir
@click.argument("name")
@click.argument("operation", type=click.Choice(OPERATIONS))
def revoke(directory: Path, name: str, operation: str) -> None:
    """Take OPERATION from principal NAME: a master drops that operation of its from
    then on (within 2 s), telling it why. What it made stays."""
    try:
        Store.open(directory).grant(name, operation, False)
    except CredentialsError as e:
        raise _fail(e) from None
    click.echo(f"{name} may no longer {operation}")


@auth.command("rotate")
@store_dir
@click.argument("name")
@click.option(
    "--secret-file",
    is_flag=True,
    help="Keep the new secret in DIRECTORY/secrets/NAME (mode 0600), for --secret-file "
    "(without it, the old one kept there is deleted).",
)
def rotate(directory: Path, name: str, secret_file: bool) -> None:
    """Give a principal a new secret (a leaked one's remedy), the last line printed; its
    kind, roles and grants stay. A connection made with the old secret is ended at its
    next message or delivery once the broker has read the store (a second; a framework
    hears the master's heartbeat every 5 s), and reconnects only with the new one."""
    try:
        secret = Store.open(directory).rotate(name, keep_secret=secret_file)
    except CredentialsError as e:
        raise _fail(e) from None
    click.echo(f"a new secret for {name}; the old one no longer works:", err=True)
    click.echo(secret)


@auth.command("remove")
@store_dir
@click.argument("name")
def remove(directory: Path, name: str) -> None:
    """Remove a principal: the broker refuses it from its next connection on, and a master
    reading this store disconnects its frameworks and refuses its calls within 2 s."""
    try:
        Store.open(directory).remove(name)
    except CredentialsError as e:
        raise _fail(e) from None
    click.echo(f"removed {name}")


@auth.command("list")
@store_dir
def list_principals(directory: Path) -> None:
    """The principals, their kinds and roles, and the operations an operator granted or
    revoked (the others are the defaults: all but a framework's reserve); never a
    secret."""
    try:
        store = Store.open(directory)
    except CredentialsError as e:
        raise _fail(e) from None
    for p in sorted(store.principals.values(), key=lambda p: (p.kind, p.name)):
        roles = f"  roles: {','.join(p.roles)}" if p.roles else ""
        reserve = "  may reserve" if p.kind == "framework" and p.reserve else ""
        changed = [
            f"{op}: {g.text()}"
            for op, g in p.grants.given
            if g.roles or (g.allowed != default(p.kind, op) and not (reserve and op == "reserve"))
        ]
        granted = f"  ({'; '.join(changed)})" if changed else ""
        click.echo(f"{p.name:24} {p.kind:10}{roles}{reserve}{granted}")
