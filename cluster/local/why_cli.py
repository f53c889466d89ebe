"""`drfmesos why FRAMEWORK`: ask the master why a framework is offered nothing, and show
its reasons -- the one that explains first, each with the numbers behind it -- and what it
was offered lately. As an operator (any framework) or as the framework's own principal."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid

import click
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from cluster.local.reaching import CONNECT_TRIES, bus_failure
from frameworks.calls import unauthenticated_principal
from protocol.tooling.brokers import BrokerURL
from protocol.tooling.cli import (
    broker_option,
    broker_url,
    cluster_option,
    log_level_default,
    timeout_option,
)
from protocol.tooling.terminal import printable
from protocol.transport.aio import within
from protocol.transport.base import BrokerUnreachable, Connector
from protocol.transport.bus import BusRefused, MqttConnector
from protocol.wire.messages import Error, Wire
from protocol.wire.topics import Topics
from protocol.wire.why import AskWhy, Why

PIPED_WIDTH = 140  # a pipe's width: a reason's sentence wraps in its column, nothing is cut


async def fetch_why(
    url: BrokerURL | Connector,
    cluster: str,
    framework: str,
    *,
    kind: str = "operator",
    timeout: float = 10.0,
    tries: int | None = None,
) -> Why:
    """Ask as `kind` (operator, or framework: the principal's own frameworks); the answer,
    or a click error saying the master's refusal. `tries`: attempts to reach the broker
    before BrokerUnreachable (else it is waited for, as a party started before it)."""
    connect = MqttConnector(url) if isinstance(url, BrokerURL) else url
    topics = Topics(cluster)
    principal = connect.principal or kind
    unproven = connect.principal is None and kind == "framework"
    if unproven:
        # without credentials a framework's principal is its name (unproven): ask as the
        # one a framework of that name registered as (the master answers its own only)
        principal = unauthenticated_principal(framework)
    request_id = uuid.uuid4().hex
    inbox = (
        topics.operator(principal)
        if kind == "operator"
        else topics.framework(principal, f"why-{request_id[:12]}")
    )
    answer: asyncio.Future[Why] = asyncio.get_running_loop().create_future()

    async def on_answer(message: Wire, _reply_to: str | None) -> None:
        if answer.done():
            return
        if isinstance(message, Why) and message.request_id == request_id:
            answer.set_result(message)
        elif isinstance(message, Error) and message.about == AskWhy.TYPE:
            said = f"{message.code}: {message.message}"
            if unproven and message.code == "unknown-framework":
                said += (
                    " (--as framework without credentials asks as the principal the name "
                    "makes, a drfmesos run's or an SDK framework's: not an id's, nor a Mesos "
                    "API framework's; leave --as out, and ask as the operator)"
                )
            answer.set_exception(click.ClickException(said))

    bus = connect(name="why", inbox=inbox, will=None)
    await bus.start(tries=tries)
    try:
        await bus.subscribe(inbox, on_answer)
        await bus.publish(
            topics.inbound(kind, principal), AskWhy(framework=framework, request_id=request_id)
        )
        return await within(answer, timeout)
    finally:
        await bus.close()


def render_why(why: Why) -> Group:
    """The reasons as a table, the first (the one that explains) marked; then the offers
    of the recent rounds."""
    roles = ", ".join(why.roles or [why.role])
    head = Text.assemble(  # (tenants' text, as text: protocol.tooling.terminal)
        ("framework ", "bold"),
        printable(why.framework_id),
        printable(f"  name {why.name}  role {roles}"),
    )
    parts: list[Text | Table] = [head]
    if not why.reasons:
        parts.append(Text("nothing keeps offers from it now", style="green"))
    else:
        reasons = Table(title="why no offers (first: the one that explains)", title_justify="left")
        reasons.add_column("#", justify="right")
        reasons.add_column("reason", style="bold")
        reasons.add_column("what the master says")
        reasons.add_column("numbers")
        for i, r in enumerate(why.reasons, 1):
            reasons.add_row(
                str(i),
                Text(r.code, style="red" if i == 1 else ""),
                Text(printable(r.message)),
                Text("\n".join(printable(f"{k}: {_figure(v)}") for k, v in r.numbers.items())),
            )
        parts.append(reasons)
    if why.offered:
        offers = Table(title="offered lately (newest first)", title_justify="left")
        offers.add_column("seconds ago", justify="right")
        offers.add_column("slave")
        offers.add_column("resources")
        for o in why.offered:
            offers.add_row(
                f"{o.seconds_ago:.1f}",
                Text(printable(o.slave_id)),
                Text(printable(str(o.resources))),
            )
        parts.append(offers)
    else:
        span = f"the last {why.since:.0f} s" if why.since else "any round yet"
        parts.append(Text(f"offered nothing in {span} ({why.rounds} rounds that made offers)"))
    return Group(*parts)


def _figure(value: object) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={_figure(v)}" for k, v in value.items()) or "-"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@click.command()
@click.argument("framework")
@broker_option()
@cluster_option
@click.option(
    "--as",
    "kind",
    type=click.Choice(["operator", "framework"]),
    default="operator",
    show_default=True,
    help="Ask as an operator principal (any framework) or as the framework's own principal.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
@timeout_option
@log_level_default("warning")
def why(
    broker: str, cluster: str, framework: str, kind: str, as_json: bool, timeout: float
) -> None:
    """Why is FRAMEWORK (its id, or its name) offered nothing? The master's reasons, the
    one that explains first, with the numbers behind each."""
    url = broker_url(broker)
    ask = fetch_why(url, cluster, framework, kind=kind, timeout=timeout, tries=CONNECT_TRIES)
    try:
        answer = asyncio.run(ask)
    except BrokerUnreachable as e:  # (a TimeoutError too: said before the master's)
        raise click.ClickException(bus_failure(e, url)) from None
    except BusRefused as e:
        raise click.ClickException(str(e)) from None
    except TimeoutError:
        if kind == "operator":
            who, other = "an operator principal", "its framework's own asks with --as framework"
        else:
            who, other = "a framework principal", "an operator asks with --as operator"
        raise click.ClickException(
            f"no answer from a master on {url} (cluster {cluster!r}) within {timeout}s: is one "
            f"running, and is this {who}? (the broker drops answers to any other; {other})"
        ) from None
    if as_json:
        click.echo(json.dumps(answer.model_dump(mode="json"), indent=2))
    else:
        tty = sys.stdout.isatty()
        Console(width=None if tty else PIPED_WIDTH).print(render_why(answer))
