"""A connection made with a secret the store no longer holds reaches nothing (attack88).

The embedded broker re-reads the store once a second, but checked a principal's secret
only at CONNECT: a connection made with alice's old secret stayed connected through
`drfmesos auth remove alice` and `auth add alice` (her secret changed, as it is when it
leaked), and then published as alice and read her frameworks' events again (measured on
2026-12-07: its Subscribe was served, its framework offered). mosquitto disconnects such
a client when it re-reads its password file. Now every publish, subscription and
delivery of a connection whose principal's stored secret changed since its CONNECT is
refused, and the connection ended at the first of them, as mosquitto ends it: a party
whose secret was rotated under it is told so when it connects again (it went on quietly
refused in everything, a slave that looked alive to itself and lost to the master).
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import aiomqtt
import pytest

from cluster.local.secure import as_principal, provision
from protocol.tooling.brokers import BrokerURL, EmbeddedBroker
from protocol.transport.aio import first_of, within
from protocol.transport.bus import Bus
from protocol.transport.mqtt_client import connection_id

pytestmark = pytest.mark.timeout(60)

CALLS = "drfmesos/default/in/framework/alice"
EVENTS = "drfmesos/default/out/framework/alice/inbox-1"


def client(url: BrokerURL, name: str) -> aiomqtt.Client:
    return aiomqtt.Client(
        "127.0.0.1",
        url.port,
        username=url.username,
        password=url.password,
        identifier=connection_id(url, name),
    )


async def connected(url: BrokerURL, name: str) -> aiomqtt.Client:
    """A client of `url`'s credentials, once the broker takes them (it reads the store's
    changes once a second)."""
    async with asyncio.timeout(10):
        while True:
            c = client(url, name)
            try:
                await c.__aenter__()
            except aiomqtt.MqttError:
                await asyncio.sleep(0.2)  # (a retry's pace)
                continue
            await c.__aexit__(None, None, None)
            return client(url, name)


async def next_message(c: aiomqtt.Client, seconds: float) -> bytes | None:
    """The payload of the next message `c` gets within `seconds`, or None."""
    with contextlib.suppress(TimeoutError):
        message = await within(anext(aiter(c.messages)), seconds)
        return bytes(message.payload)
    return None


async def test_a_connection_with_alices_old_secret_reaches_nothing(tmp_path: Path) -> None:
    store = provision(tmp_path / "auth", [("master", "master"), ("alice", "framework")])
    broker = EmbeddedBroker(auth=store.path)
    await broker.start()
    try:
        master_url = as_principal(broker.url, store, "master")
        old = as_principal(broker.url, store, "alice")
        async with client(master_url, "master") as master, client(old, "thief") as thief:
            await master.subscribe("drfmesos/+/in/#", qos=1)
            await thief.subscribe("drfmesos/default/out/framework/alice/#", qos=1)
            await thief.publish(CALLS, b"before", qos=1)
            assert await next_message(master, 5) == b"before"
            await master.publish(EVENTS, b"events before", qos=1)
            assert await next_message(thief, 5) == b"events before"

            store.remove("alice")  # (her secret leaked: a new one)
            store.add("alice", "framework", (), keep_secret=True)
            new = as_principal(broker.url, store, "alice")
            assert new.password != old.password
            async with await connected(new, "alice") as alice:  # (the broker read the store)
                await alice.publish(CALLS, b"new", qos=1)
                assert await next_message(master, 5) == b"new"

                with contextlib.suppress(aiomqtt.MqttError):  # (refused, or cut off)
                    await thief.publish(CALLS, b"after", qos=1)
                assert await next_message(master, 2) is None
                await master.publish(EVENTS, b"events after", qos=1)
                assert await next_message(alice, 5) is None  # (not subscribed: the thief is)
                with pytest.raises(aiomqtt.MqttError):  # (its connection ended)
                    await next_message(thief, 5)
    finally:
        await broker.stop()


async def test_a_party_whose_secret_was_replaced_is_cut_off_and_told_so(tmp_path: Path) -> None:
    """A party connected as alice when her secret is replaced: its next message ends its
    connection, and connecting again with the secret it holds is refused, so its bus
    gives up with the broker's refusal for its process to say."""
    store = provision(tmp_path / "auth", [("alice", "framework")])
    broker = EmbeddedBroker(auth=store.path)
    await broker.start()
    try:
        old = as_principal(broker.url, store, "alice")
        bus = Bus(old, name="alice's framework")
        await bus.start()
        try:
            await within(bus.publish_raw(CALLS, b"before"), 5)
            store.remove("alice")
            store.add("alice", "framework", (), keep_secret=True)
            async with await connected(as_principal(broker.url, store, "alice"), "alice"):
                with contextlib.suppress(Exception):  # (refused, or cut off: either way)
                    await within(bus.publish_raw(CALLS, b"after"), 5)
                await first_of(bus.gave_up, timeout=20)
                assert bus.refused is not None, "it went on, unheard"
                assert "not authorized" in str(bus.refused).lower() or "secret" in str(
                    bus.refused
                ), bus.refused
        finally:
            await bus.close()
    finally:
        await broker.stop()


async def test_a_connection_of_a_removed_principal_is_ended(tmp_path: Path) -> None:
    """`auth remove alice` (no new secret): her connection is ended at its next message,
    as one whose secret was replaced is; it had been refused in everything and left
    connected, her party alive to itself and lost to everyone (the store's rules, which
    no longer name her, were read first and answered before her secret was looked at)."""
    store = provision(tmp_path / "auth", [("master", "master"), ("alice", "framework")])
    broker = EmbeddedBroker(auth=store.path)
    await broker.start()
    try:
        old = as_principal(broker.url, store, "alice")
        async with client(old, "alice") as alice:
            await alice.publish(CALLS, b"before", qos=1)
            store.remove("alice")
            async with asyncio.timeout(10):  # (until the broker has read the store)
                while True:
                    try:
                        async with client(old, "alice-again"):
                            await asyncio.sleep(0.2)  # (a retry's pace)
                    except aiomqtt.MqttError:
                        break
            with contextlib.suppress(aiomqtt.MqttError):  # (refused, or cut off)
                await alice.publish(CALLS, b"after", qos=1)
            with pytest.raises(aiomqtt.MqttError):  # (its connection ended)
                await next_message(alice, 5)
    finally:
        await broker.stop()
