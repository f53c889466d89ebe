"""A tenant connecting to the embedded broker reads none of what its ACL hides (attack89).

amqtt 0.12.1 sends every client that connects, after the messages queued for its
session, the retained messages of every topic filter *any* client subscribes to
(`Broker.stream_connected` walks the broker's whole subscription table), straight to the
connection, past the topic-check plugin. With an operator's `drfmesos view` open (it
subscribes to `<p>/state`), a tenant that merely connected was handed the master's
retained state: every framework's tasks, names and messages, the offers of all tenants;
and the retained messages other tenants' subscriptions match. mosquitto sends a
connection only what its own subscriptions match and its ACL allows.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import aiomqtt
import pytest

from cluster.local.secure import as_principal, provision
from protocol.tooling.brokers import BrokerURL, EmbeddedBroker
from protocol.transport.aio import within
from protocol.transport.mqtt_client import connection_id

pytestmark = pytest.mark.timeout(60)

STATE = "drfmesos/default/state"
LEADER = "drfmesos/default/leader"


def client(url: BrokerURL, name: str, *, clean: bool = True) -> aiomqtt.Client:
    return aiomqtt.Client(
        "127.0.0.1",
        url.port,
        username=url.username,
        password=url.password,
        identifier=connection_id(url, name),
        clean_session=clean,
    )


async def messages_within(c: aiomqtt.Client, seconds: float) -> list[tuple[str, bytes]]:
    """Every message `c` gets within `seconds`."""
    got: list[tuple[str, bytes]] = []

    async def read() -> None:
        async for message in c.messages:
            got.append((str(message.topic), bytes(message.payload)))

    with contextlib.suppress(TimeoutError):
        await within(read(), seconds)
    return got


@pytest.mark.parametrize("clean", [True, False])
async def test_a_tenant_connecting_is_not_handed_the_operators_retained_state(
    tmp_path: Path, clean: bool
) -> None:
    store = provision(
        tmp_path / "auth",
        [("master", "master"), ("ops", "operator"), ("alice", "framework")],
    )
    broker = EmbeddedBroker(auth=store.path)
    await broker.start()
    try:
        master_url = as_principal(broker.url, store, "master")
        ops_url = as_principal(broker.url, store, "ops")
        alice_url = as_principal(broker.url, store, "alice")
        async with client(master_url, "master") as master, client(ops_url, "ops") as ops:
            await master.publish(STATE, b"every tenant's tasks", qos=1, retain=True)
            await master.publish(LEADER, b"the leader", qos=1, retain=True)
            await ops.subscribe(STATE, qos=1)  # (an operator's drfmesos view)
            assert (STATE, b"every tenant's tasks") in await messages_within(ops, 2)

            if not clean:  # (a persistent session, back: its queue, then the table)
                async with client(alice_url, "alice", clean=False) as alice:
                    await alice.subscribe(LEADER, qos=1)
            async with client(alice_url, "alice", clean=clean) as alice:
                got = await messages_within(alice, 2)
            assert [topic for topic, _ in got if topic != LEADER] == []
            # (its own subscription's retained message still comes back with it)
            assert ((LEADER, b"the leader") in got) is not clean

            async with client(alice_url, "alice") as alice:
                await alice.subscribe(STATE, qos=1)  # (refused: an operator's)
                await alice.subscribe(LEADER, qos=1)
                assert await messages_within(alice, 2) == [(LEADER, b"the leader")]
    finally:
        await broker.stop()
