"""How an operator's command reaches the cluster, and what it says when it cannot: one
place that turns the transport's failures into a sentence, so that `drfmesos state`,
`quota`, `weights`, `teardown`, `slaves gone` and `events` each say the same for the
same cause:

- no broker at the URL: which URL, and what the attempt met (refused, an unknown host,
  unreachable, no answer, TLS failing), at once (a command tries CONNECT_TRIES times,
  a fraction of a second, where a party started before its broker waits for it);
- the broker refused the credentials, or its certificate is not trusted;
- the principal taken over by another connection, or dropped for what it published (then,
  as when no master answers, it adds that a command takes an operator principal);
- a broker but no master answering: that, after the --timeout it names.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import click

from protocol.tooling.brokers import BrokerURL
from protocol.transport.base import BrokerUnreachable, BusClosed, PublishDropped

T = TypeVar("T")

CONNECT_TRIES = 3  # attempts to connect (0.15 s apart at most) before a command says why not


def run_command(
    url: BrokerURL, cluster: str, step: Coroutine[Any, Any, T], *, awaited: str, timeout: float
) -> T:
    """Run an operator command's `step`; a failure ends the command with what it means.
    `awaited`: what a master would have done ("answered the call", "published its state")
    within `timeout` seconds, the step's own wait once connected."""
    try:
        return asyncio.run(step)
    except (BrokerUnreachable, BusClosed) as e:
        raise click.ClickException(bus_failure(e, url)) from None
    except TimeoutError:
        raise click.ClickException(no_master(url, cluster, awaited, timeout)) from None


def bus_failure(error: BrokerUnreachable | BusClosed, url: BrokerURL) -> str:
    """What the bus met, said to the person who ran the command."""
    if isinstance(error, BrokerUnreachable):
        return f"{error}; --broker (or DRFMESOS_BROKER) says where it is"
    if isinstance(error, PublishDropped):  # (the broker's ACL: not an operator's topics)
        return f"{error}.{operator_hint(url)}"
    return str(error)  # (refused credentials, an untrusted certificate: nothing of kinds)


def no_master(url: BrokerURL, cluster: str, awaited: str, timeout: float) -> str:
    """Connected, but nothing came from a master in time."""
    said = (
        f"the broker at {url.bare} answers, but no master of cluster {cluster!r} "
        f"{awaited} within {timeout:g} s: is one running (drfmesos master --cluster {cluster})?"
    )
    return said + operator_hint(url)


def operator_hint(url: BrokerURL) -> str:
    """Where the broker checks credentials, what an operator's command needs of them."""
    if not url.username:
        return ""
    return (
        f" On a cluster with credentials this takes an operator principal: is "
        f"{url.username!r} one? (`drfmesos auth list STORE` says each principal's kind; "
        "the broker gives any other no answer: a team's principal asks its operator)"
    )
