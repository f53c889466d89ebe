"""The Transport interface, as the master, the slave and the SDK use it, on both of its
implementations: the MQTT bus on a real (embedded) broker, and the in-memory one. What
the in-process tests rely on of the memory transport is checked here against the bus;
then the memory broker's own rules: identity and the per-principal ACL."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import msgpack
import pytest

from protocol.tooling.credentials import Principal, filter_allows
from protocol.transport.base import Connector, Transport
from protocol.transport.bus import Dispatcher
from protocol.transport.memory import MemoryBroker
from protocol.transport.message_counts import MessageCounts
from protocol.wire.codec import PROTOCOL_VERSION, encode
from protocol.wire.messages import (
    ALL_MESSAGES,
    ITEM_OF,
    Error,
    Gone,
    Heartbeat,
    Leader,
    Revive,
)
from protocol.wire.topics import Topics

from harness.helpers import Inbox, eventually
from harness.strategies import example
from harness.transports import connector as connector

T = Topics("transport")


@contextlib.asynccontextmanager
async def opened(
    connect: Connector, name: str, inbox: str | None = None
) -> AsyncIterator[Transport]:
    transport = connect(name=name, inbox=inbox, will=None)
    await transport.start()
    try:
        yield transport
    finally:
        await transport.close()


async def test_a_message_of_every_type_arrives_equal_with_its_senders_inbox(
    connector: Connector,
) -> None:
    inbox = Inbox()
    async with opened(connector, "rx") as rx, opened(connector, "tx", "tx/in") as tx:
        await rx.subscribe(f"{T.prefix}/#", inbox)  # (a wildcard)
        sent = [example(cls) for cls in ALL_MESSAGES]
        for message in sent:
            tx.post(T.inbound("framework", "fw"), message)
        expected = [i for m in sent for i in (m.items if type(m) in ITEM_OF else [m])]  # type: ignore[attr-defined]
        await inbox.wait_until(lambda: len(inbox.messages) == len(expected))
        assert [m for m, _ in inbox.messages] == expected
        assert {reply_to for _, reply_to in inbox.messages} == {"tx/in"}


async def test_bad_input_is_refused_with_an_error_to_its_sender(connector: Connector) -> None:
    errors, handled = Inbox(), Inbox()
    async with opened(connector, "master") as master, opened(connector, "fw", "fw/in") as fw:
        dispatcher = Dispatcher(master, "master")
        dispatcher.on(Revive, handled)
        await master.subscribe("calls", dispatcher)
        await fw.subscribe("fw/in", errors)
        bad = msgpack.packb([PROTOCOL_VERSION, "Revive", "fw/in", {"framework_id": 7}])
        await fw.publish_raw("calls", bad)
        assert (await errors.wait_for(Error)).code == "invalid"
        await fw.publish_raw("calls", encode(Gone(kind="x", id="y"), "fw/in"))
        await errors.wait_for(Error, lambda e: e.code == "unexpected-type")
        await fw.publish("calls", Revive(framework_id="f1"))
        assert (await handled.wait_for(Revive)).framework_id == "f1"


async def test_what_a_deposed_master_sends_is_fenced_off(connector: Connector) -> None:
    inbox = Inbox()
    async with (
        opened(connector, "slave") as slave,
        opened(connector, "old") as old,
        opened(connector, "new") as new,
    ):
        await slave.subscribe("orders", inbox)
        old.epoch, new.epoch = 1, 2
        await new.publish("orders", Heartbeat(source="new"))
        await inbox.wait_for(Heartbeat)
        await old.publish("orders", Heartbeat(source="old"))  # older than the newest seen
        await new.publish("orders", Heartbeat(source="new-again"))
        await inbox.wait_count(Heartbeat, 2)
        assert [m.source for m in inbox.of(Heartbeat)] == ["new", "new-again"]
        assert slave.stats["fenced"] == 1


async def test_a_retained_message_reaches_a_later_subscriber_and_on_connect_runs(
    connector: Connector,
) -> None:
    inbox = Inbox()
    announced: list[str] = []
    async with opened(connector, "master") as master:
        await master.publish(T.leader, Leader(master_id="m1", epoch=3), retain=True)
        follower = connector(name="follower", inbox=None, will=None)

        async def on_connect() -> None:
            announced.append(follower.incarnation)

        follower.on_connect(on_connect)
        await follower.start()
        try:
            await follower.subscribe(T.leader, inbox)
            assert (await inbox.wait_for(Leader)).master_id == "m1"
            await eventually(lambda: announced == [follower.incarnation])
        finally:
            await follower.close()


@pytest.mark.parametrize(
    ("pattern", "topic", "matches"),
    [
        ("a/+/c", "a/b/c", True),
        ("a/+/c", "a/b/d", False),
        ("a/#", "a/b/c", True),
        ("a/#", "a", True),
        ("a/b", "a/b/c", False),
        ("a/+", "a/b/c", False),
        ("+/+/c", "a/b/c", True),
    ],
)
def test_topic_filters_match_as_in_mqtt(pattern: str, topic: str, matches: bool) -> None:
    assert filter_allows(pattern, topic) is matches  # (the memory broker's matching)


def store() -> MemoryBroker:
    return MemoryBroker(
        [
            Principal("master", "master"),
            Principal("team-a", "framework", ("team-a",)),
            Principal("team-b", "framework", ("team-b",)),
        ]
    )


async def test_a_principal_publishes_only_under_its_own_name() -> None:
    broker = store()
    calls = Inbox()
    async with (
        opened(broker.connector("master"), "master") as master,
        opened(broker.connector("team-a"), "a") as a,
    ):
        await master.subscribe(T.inbound_all, calls)
        await a.publish(T.inbound("framework", "team-b"), Revive(framework_id="not-mine"))
        await a.publish(T.gone("framework", "team-b"), Gone(kind="framework", id="b"))
        await a.publish(T.inbound("framework", "team-a"), Revive(framework_id="mine"))
        await calls.wait_for(Revive)
        assert [m.framework_id for m in calls.of(Revive)] == ["mine"]
        assert calls.of(Gone) == []
        assert broker.denied == 2


async def test_a_principal_reads_only_its_own_outbox() -> None:
    broker = store()
    a_in, b_in = Inbox(), Inbox()
    async with (
        opened(broker.connector("master"), "master") as master,
        opened(broker.connector("team-a"), "a") as a,
        opened(broker.connector("team-b"), "b") as b,
    ):
        await a.subscribe(f"{T.prefix}/out/#", a_in)  # asks for everyone's
        await b.subscribe(T.framework("team-b", "#"), b_in)
        await master.publish(T.framework("team-b", "x"), Revive(framework_id="for-b"))
        await master.publish(T.framework("team-a", "x"), Revive(framework_id="for-a"))
        await a_in.wait_for(Revive)
        await b_in.wait_for(Revive)
        assert [m.framework_id for m in a_in.of(Revive)] == ["for-a"]
        assert [m.framework_id for m in b_in.of(Revive)] == ["for-b"]


async def test_an_unknown_principal_is_refused() -> None:
    with pytest.raises(Exception, match="refused the credentials"):
        await store().connector("mallory")(name="m", inbox=None, will=None).start()


async def test_a_lost_connection_announces_its_will_and_a_clean_close_does_not() -> None:
    broker = store()
    gone = Inbox()
    will = (T.gone("framework", "team-a"), "framework", "a-inbox")
    async with opened(broker.connector("master"), "master") as master:
        await master.subscribe(T.gone_all, gone)
        polite = broker.connector("team-a")(name="a", inbox=None, will=will)
        await polite.start()
        await polite.close()
        lost = broker.connector("team-a")(name="a", inbox=None, will=will)
        await lost.start()
        lost.lose()
        arrived = await gone.wait_for(Gone)
        assert (arrived.id, arrived.incarnation) == ("a-inbox", lost.incarnation)
        assert len(gone.of(Gone)) == 1


async def test_a_routes_counted_wrapper_is_made_once_and_counts_each_outcome() -> None:
    """One wrapper a route and kind, reused for every message (not made a message), each
    run's outcome its own: handled, refused with its code, failed."""
    counts = MessageCounts()
    codes = iter(["", "forbidden", "boom"])

    async def route(message: object, caller: object) -> None:
        code = next(codes)
        if code == "boom":
            raise RuntimeError(code)
        if code:
            counts.refused("Ping", code)

    wrapped = counts.counted(route, "Ping")
    assert counts.counted(route, "Ping") is wrapped
    assert counts.counted(route, "Pong") is not wrapped
    await wrapped(None, None)
    await wrapped(None, None)
    with pytest.raises(RuntimeError):
        await wrapped(None, None)
    assert counts.outcomes == {
        ("Ping", "handled", ""): 1,
        ("Ping", "refused", "forbidden"): 1,
        ("Ping", "failed", ""): 1,
    }
