"""The bus on real brokers (amqtt and mosquitto) on free loopback ports."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import msgpack
import pytest

from cluster.local.secure import as_principal, provision
from protocol.tooling.brokers import (
    MAX_PACKET_BYTES,
    BrokerURL,
    EmbeddedBroker,
    MosquittoBroker,
    end_process,
)
from protocol.tooling.ports import free_port
from protocol.transport.aio import within
from protocol.transport.bus import Bus, Dispatcher
from protocol.wire.codec import PROTOCOL_VERSION, encode
from protocol.wire.messages import (
    ALL_MESSAGES,
    ITEM_OF,
    ClusterEvent,
    Error,
    FrameworkMessage,
    Gone,
    Heartbeat,
    Revive,
    StatusAck,
    TaskState,
    TaskStatus,
    Teardown,
    Update,
    Wire,
)
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics

from conftest import need_mosquitto
from harness.helpers import Inbox, eventually
from harness.strategies import example

Broker = EmbeddedBroker | MosquittoBroker
T = Topics("test")
TO_MASTER = T.inbound("framework", "fw")


async def test_a_message_of_every_type_crosses_the_bus_and_arrives_equal(broker: Broker) -> None:
    inbox = Inbox()
    async with Bus(broker.url, name="rx") as rx, Bus(broker.url, name="tx", inbox="tx/in") as tx:
        await rx.subscribe(f"{T.prefix}/#", inbox)
        sent = [example(cls) for cls in ALL_MESSAGES]
        for message in sent:
            await tx.publish(TO_MASTER, message)
        # a list's items arrive one by one, as if each had come alone
        expected = [i for m in sent for i in (m.items if type(m) in ITEM_OF else [m])]  # type: ignore[attr-defined]
        await inbox.wait_count(
            type(expected[-1]), sum(type(m) is type(expected[-1]) for m in expected)
        )
        arrived = [m for m, _ in inbox.messages]
        assert arrived == expected  # same order, same values, same types
        assert {reply_to for _, reply_to in inbox.messages} == {"tx/in"}


async def test_bad_input_is_answered_with_an_error_to_its_sender(broker: Broker) -> None:
    import msgpack

    errors = Inbox()
    async with Bus(broker.url, name="master") as master, Bus(broker.url, name="fw") as fw:
        dispatcher = Dispatcher(master, "master")
        handled = Inbox()
        dispatcher.on(Revive, handled)
        await master.subscribe(TO_MASTER, dispatcher)
        await fw.subscribe("fw/inbox", errors)

        # a body that fails validation, with the sender's inbox in the envelope
        bad = msgpack.packb([PROTOCOL_VERSION, "Revive", "fw/inbox", {"framework_id": 7}])
        await fw.publish_raw(TO_MASTER, bad)
        err = await errors.wait_for(Error)
        assert err.code == "invalid"
        assert "framework_id" in err.message
        assert err.about == "Revive"

        # a valid message of a type the master does not take
        await fw.publish_raw(TO_MASTER, encode(Gone(kind="x", id="y"), "fw/inbox"))
        err2 = await errors.wait_for(Error, lambda e: e.code == "unexpected-type")
        assert "Gone" in err2.message

        # garbage: nobody to answer, but the receiver goes on working
        await fw.publish_raw(TO_MASTER, b"\xc1\xff garbage")
        await fw.publish(TO_MASTER, Revive(framework_id="f1"))
        ok = await handled.wait_for(Revive)
        assert ok.framework_id == "f1"
        assert len(handled.messages) == 1


async def test_broker_restart_loses_no_acknowledged_qos1_message(
    mosquitto: MosquittoBroker,
) -> None:
    """Everything `publish` returned for reaches a connected persistent subscriber,
    although the broker restarts in the middle of the stream."""
    inbox = Inbox()
    rx = Bus(mosquitto.url, name="rx", client_id="rx-live", persistent=True)
    async with rx, Bus(mosquitto.url, name="tx") as tx:
        await rx.subscribe("stream/#", inbox)
        acknowledged: list[str] = []

        async def produce() -> None:
            for i in range(400):
                await tx.publish("stream/x", Heartbeat(source=str(i)), timeout=30)
                acknowledged.append(str(i))
                if len(acknowledged) == 100:
                    halfway.set()

        halfway = asyncio.Event()
        producer = asyncio.create_task(produce())
        await within(halfway.wait(), 30)  # restart in the middle of the stream
        await mosquitto.restart()
        await within(producer, 60)
        assert len(acknowledged) == 400

        def received() -> set[str]:
            return {m.source for m in inbox.of(Heartbeat)}

        # at least once: one sent again over the restart may arrive twice
        await inbox.wait_until(lambda: received() >= set(acknowledged), timeout=30)
        assert tx.connections == 2  # both really reconnected
        assert rx.connections == 2


async def test_messages_queued_for_an_absent_subscriber_survive_a_restart(
    mosquitto: MosquittoBroker,
) -> None:
    """The subscriber is away while the stream runs (its messages queue in its session at
    the broker), the broker restarts in the middle of the stream, the publisher rides over
    the restart, and the subscriber then comes back for all of it."""
    inbox = Inbox()
    rx_id = "rx-persistent"
    async with Bus(mosquitto.url, name="rx", client_id=rx_id, persistent=True) as rx:
        await rx.subscribe("stream/#", inbox)  # creates the session, then goes away
    acknowledged: list[str] = []
    async with Bus(mosquitto.url, name="tx") as tx:

        async def produce() -> None:
            for i in range(400):
                await tx.publish("stream/x", Heartbeat(source=str(i)), timeout=30)
                acknowledged.append(str(i))
                if len(acknowledged) == 150:
                    halfway.set()

        halfway = asyncio.Event()
        producer = asyncio.create_task(produce())
        await within(halfway.wait(), 30)  # restart in the middle of the stream
        await mosquitto.restart()
        await within(producer, 60)
        assert tx.connections == 2  # it really rode over the restart

    rx = Bus(mosquitto.url, name="rx", client_id=rx_id, persistent=True)
    await rx.subscribe("stream/#", inbox)
    async with rx:
        await inbox.wait_count(Heartbeat, 400, timeout=30)
    assert {m.source for m in inbox.of(Heartbeat)} == set(acknowledged)
    assert len(acknowledged) == 400


async def test_a_handler_publishing_when_the_broker_goes_does_not_hold_up_the_reconnect(
    mosquitto: MosquittoBroker,
) -> None:
    """A handler awaiting `publish` (its PUBACK) when the broker goes: its bus reconnects
    all the same, the publish then completes, and what arrives next is handled after it.
    (It waited forever: the bus reconnected only once its handler returned.)"""
    seen: list[str] = []
    published = asyncio.Event()
    inbox = Inbox()

    async def answer(message: Wire, _reply_to: str | None) -> None:
        assert isinstance(message, Heartbeat)
        seen.append(message.source)
        if message.source == "first" and not restarted.is_set():  # (QoS 1 may bring it
            # twice: the broker can go before it has the PUBACK)
            await mosquitto.stop()  # the broker goes before the answer is acknowledged
            restarted.set()
            await rx.publish("answers", Teardown(framework_id="answer"), timeout=30)
            published.set()

    restarted = asyncio.Event()
    async with (
        Bus(mosquitto.url, name="rx", client_id="rx-answering", persistent=True) as rx,
        Bus(mosquitto.url, name="tx", client_id="tx-asking", persistent=True) as tx,
    ):
        await rx.subscribe("questions", answer)
        await tx.subscribe("answers", inbox)
        await tx.publish("questions", Heartbeat(source="first"))
        await within(restarted.wait(), 10)
        await mosquitto.start()
        await within(published.wait(), 30)
        await inbox.wait_for(Teardown, timeout=30)
        await tx.publish("questions", Heartbeat(source="second"), timeout=30)
        await eventually(lambda: "second" in seen, timeout=30)
        assert set(seen[:-1]) == {"first"}
        assert seen[-1] == "second"  # in order, after the handler that waited
        assert rx.connections == 2


async def test_subscriptions_survive_a_broker_restart(broker: Broker) -> None:
    inbox = Inbox()
    async with Bus(broker.url, name="rx") as rx, Bus(broker.url, name="tx") as tx:
        await rx.subscribe("a/b", inbox)
        await tx.publish("a/b", Teardown(framework_id="before"))
        await inbox.wait_for(Teardown)
        await broker.restart()
        await rx.wait_connected(10)
        # the first publish after the restart may race the re-subscribe: retry until seen
        async with asyncio.timeout(15):
            while not inbox.of(Teardown)[1:]:
                await tx.publish("a/b", Teardown(framework_id="after"))
                try:
                    await inbox.wait_count(Teardown, 2, timeout=0.5)
                except TimeoutError:
                    continue
        assert inbox.of(Teardown)[-1].framework_id == "after"


WILL_CLIENT = textwrap.dedent(
    """
    import asyncio, sys
    from protocol import logs
    from protocol.transport.bus import Bus
    logs.configure("warning")
    async def main():
        will = (sys.argv[2], "slave", "s-will")
        async with Bus(sys.argv[1], name="doomed", will=will) as bus:
            print(bus.incarnation, flush=True)
            await asyncio.Event().wait()
    asyncio.run(main())
    """
)


async def test_killing_a_clients_process_makes_its_last_will_arrive(broker: Broker) -> None:
    inbox = Inbox()
    gone_topic = T.gone("slave", "s-will")
    async with Bus(broker.url, name="watcher") as watcher:
        await watcher.subscribe(T.gone_all, inbox)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            WILL_CLIENT,
            broker.url.url,
            gone_topic,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.getcwd()},
        )
        try:
            assert proc.stdout is not None
            incarnation = (await within(proc.stdout.readline(), 20)).decode().strip()
            assert incarnation
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
            gone = await inbox.wait_for(Gone, timeout=20)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        assert (gone.kind, gone.id, gone.incarnation) == ("slave", "s-will", incarnation)


async def test_a_clean_close_sends_no_last_will(broker: Broker) -> None:
    inbox = Inbox()
    async with Bus(broker.url, name="watcher") as watcher:
        await watcher.subscribe(T.gone_all, inbox)
        async with Bus(broker.url, name="polite", will=(T.gone("slave", "p"), "slave", "p")):
            pass
        # a marker published after the close proves the watcher saw everything before it
        await watcher.subscribe("marker", inbox)
        async with Bus(broker.url, name="marker") as m:
            await m.publish("marker", Revive(framework_id="m"))
        await inbox.wait_for(Revive)
        assert inbox.of(Gone) == []


@pytest.mark.parametrize("qos", [0, 1])
async def test_posts_leave_in_order(broker: Broker, qos: int) -> None:
    inbox = Inbox()
    async with Bus(broker.url, name="rx") as rx, Bus(broker.url, name="tx") as tx:
        await rx.subscribe("order", inbox)
        for i in range(200):
            tx.post("order", Heartbeat(source=str(i)), qos=qos)
        await inbox.wait_count(Heartbeat, 200)
        assert [m.source for m in inbox.of(Heartbeat)] == [str(i) for i in range(200)]


async def test_posts_across_a_broker_restart_all_arrive_first_in_order(
    mosquitto: MosquittoBroker,
) -> None:
    """`post` does not wait for the broker: what it had not acknowledged when it went away,
    and what was posted while it was away, is sent after the reconnect, in the order it
    was posted (at least once: a repeat may follow, never overtake)."""
    inbox = Inbox()
    rx = Bus(mosquitto.url, name="rx", client_id="rx-posts", persistent=True)
    async with rx, Bus(mosquitto.url, name="tx") as tx:
        await rx.subscribe("stream/#", inbox)
        for i in range(300):  # most still unacknowledged when the broker stops
            tx.post("stream/x", Heartbeat(source=str(i)))
        await mosquitto.restart()
        for i in range(300, 600):  # posted before the bus has noticed and reconnected
            tx.post("stream/x", Heartbeat(source=str(i)))
        await inbox.wait_for(Heartbeat, lambda m: m.source == "599", timeout=30)
        firsts = list(dict.fromkeys(int(m.source) for m in inbox.of(Heartbeat)))
        assert sorted(firsts) == list(range(600))
        assert firsts == list(range(600))
        assert tx.connections == 2


async def test_a_topic_mqtt_cannot_carry_fails_that_message_only(broker: Broker) -> None:
    inbox = Inbox()
    async with Bus(broker.url, name="rx") as rx, Bus(broker.url, name="tx") as tx:
        await rx.subscribe("fine", inbox)
        tx.post("bad/#", Heartbeat(source="never"))  # logged and dropped, not raised here
        with pytest.raises(ValueError, match="wildcard"):
            await tx.publish("bad/+", Heartbeat(source="never"))
        tx.post("fine", Heartbeat(source="after"))
        assert (await inbox.wait_for(Heartbeat)).source == "after"


async def test_a_publish_goes_after_what_was_posted_before_it(broker: Broker) -> None:
    """A driver posts its calls and publishes its Teardown: the Teardown must not overtake
    the calls still waiting in the batch."""
    inbox = Inbox()
    async with Bus(broker.url, name="rx") as rx, Bus(broker.url, name="tx") as tx:
        await rx.subscribe("calls", inbox)
        for i in range(5):
            tx.post("calls", Heartbeat(source=str(i)))
        await tx.publish("calls", Heartbeat(source="last"))
        await inbox.wait_count(Heartbeat, 6)
        assert [m.source for m in inbox.of(Heartbeat)] == ["0", "1", "2", "3", "4", "last"]


async def test_what_was_posted_is_sent_on_close_even_behind_a_backlog(broker: Broker) -> None:
    """A party busy with what it received (a backlog) holds its posts back to batch them;
    closing must send them anyway, not leave them in the batch."""
    inbox = Inbox()
    gate = asyncio.Event()
    arrived = asyncio.Event()

    async def busy(_m: object, _r: str | None) -> None:
        arrived.set()
        await gate.wait()  # the receive loop is held here: the rest piles up

    rx = Bus(broker.url, name="rx")
    async with rx, Bus(broker.url, name="noise") as noise:
        await rx.subscribe("out", inbox)
        tx = Bus(broker.url, name="tx")
        await tx.start()
        await tx.subscribe("in", busy)
        for i in range(20):
            noise.post("in", Heartbeat(source=str(i)))
        await within(arrived.wait(), 10)
        await eventually(lambda: tx.backlog() > 0)  # the rest queue behind the held handler
        tx.post("out", Heartbeat(source="last words"))
        await tx.close()
        assert (await inbox.wait_for(Heartbeat)).source == "last words"
        gate.set()


async def test_replies_keep_the_order_of_what_they_answer_lone_or_batched(broker: Broker) -> None:
    """A lone arrival is answered at once and a batch's answers are batched: either way
    the answers leave in the order of the questions."""
    inbox = Inbox()

    async def answer(m: Wire, _r: str | None) -> None:
        assert isinstance(m, Heartbeat)
        echo.post("answers", Heartbeat(source=m.source))
        echo.post("answers", Heartbeat(source=m.source + "'"))

    async with (
        Bus(broker.url, name="rx") as rx,
        Bus(broker.url, name="echo") as echo,
        Bus(broker.url, name="tx") as tx,
    ):
        await rx.subscribe("answers", inbox)
        await echo.subscribe("questions", answer)
        sent = []
        for i in range(60):
            for j in range(i % 4):  # 0 to 3 posts in one turn: lone ones and batches
                sent.append(f"{i}.{j}")
                tx.post("questions", Heartbeat(source=sent[-1]))
            await asyncio.sleep(0)  # (the next turn: the next batch)
        await inbox.wait_count(Heartbeat, 2 * len(sent))
        expected = [s for q in sent for s in (q, q + "'")]
        assert [m.source for m in inbox.of(Heartbeat)] == expected


async def test_a_wildcard_subscription_made_again_reaches_its_new_handler(broker: Broker) -> None:
    first, second = Inbox(), Inbox()
    async with Bus(broker.url, name="rx") as rx, Bus(broker.url, name="tx") as tx:
        await rx.subscribe("w/+", first)
        tx.post("w/x", Heartbeat(source="one"))
        assert (await first.wait_for(Heartbeat)).source == "one"
        await rx.unsubscribe("w/+")
        await rx.subscribe("w/+", second)
        tx.post("w/x", Heartbeat(source="two"))
        assert (await second.wait_for(Heartbeat)).source == "two"
        assert [m.source for m in first.of(Heartbeat)] == ["one"]


async def test_a_retained_call_is_never_read_only_the_masters_announcements_are(
    broker: Broker,
) -> None:
    """A tenant may publish retained on its own call topic: the broker would replay that
    call to every master that starts (a framework registered by nobody). Only the
    master's announcements (leader, state) are read retained."""
    async with Bus(broker.url, name="tenant") as tenant:
        await tenant.publish(TO_MASTER, Heartbeat(source="kept"), retain=True)
        await tenant.publish(T.leader, Heartbeat(source="announced"), retain=True)
        inbox = Inbox()
        async with Bus(broker.url, name="master") as master:
            await master.subscribe(f"{T.prefix}/#", inbox)
            await tenant.publish(TO_MASTER, Heartbeat(source="live"))  # after, on its topic
            await inbox.wait_for(Heartbeat, lambda m: m.source == "live")
            assert {m.source for m in inbox.of(Heartbeat)} == {"announced", "live"}


async def test_a_payload_bigger_than_the_socket_takes_at_once_arrives_whole_and_in_order(
    broker: Broker,
) -> None:
    """Megabytes do not fit the socket's buffer in one write: the rest goes when the
    socket can take it, and what was posted after it still comes after it."""
    inbox = Inbox()
    big = b"x" * (6 * 2**20)
    async with Bus(broker.url, name="rx") as rx, Bus(broker.url, name="tx") as tx:
        await rx.subscribe("big", inbox)
        tx.post("big", FrameworkMessage(framework_id="f", slave_id="s", executor_id="e", data=big))
        tx.post("big", Heartbeat(source="after"))
        await inbox.wait_count(Heartbeat, 1, timeout=30)
        (got,) = inbox.of(FrameworkMessage)
        assert got.data == big
        assert [type(m).__name__ for m, _ in inbox.messages] == ["FrameworkMessage", "Heartbeat"]


async def test_a_payload_over_the_brokers_limit_fails_alone_and_the_connection_lives(
    broker: Broker,
) -> None:
    """The broker would drop the connection for it, and every reconnect would send it
    again: it must fail here, alone, and what follows must still go."""
    inbox = Inbox()
    huge = b"x" * (MAX_PACKET_BYTES + 1)
    async with Bus(broker.url, name="rx") as rx, Bus(broker.url, name="tx") as tx:
        await rx.subscribe("big/#", inbox)
        msg = FrameworkMessage(framework_id="f", slave_id="s", executor_id="e", data=huge)
        with pytest.raises(ValueError, match="limit"):
            await tx.publish("big/one", msg)
        tx.post("big/one", msg)  # logged and dropped
        tx.post("big/one", Heartbeat(source="after"))
        assert (await inbox.wait_for(Heartbeat)).source == "after"
        assert inbox.of(FrameworkMessage) == []
        assert tx.connections == 1


async def test_posts_of_more_bytes_than_one_payload_takes_leave_as_several_in_order(
    broker: Broker,
) -> None:
    inbox = Inbox()
    chunk = b"y" * (200 * 1024)
    async with Bus(broker.url, name="rx") as rx, Bus(broker.url, name="tx") as tx:
        await rx.subscribe("many", inbox)
        tx.post("many", Heartbeat(source="first"))  # (the rest wait behind it, batched)
        for i in range(100):  # 20 MB in one turn: more than one payload may carry
            tx.post("many", FrameworkMessage(framework_id=str(i), slave_id="s",
                                             executor_id="e", data=chunk))  # fmt: skip
        await inbox.wait_count(FrameworkMessage, 100, timeout=60)
        assert [m.framework_id for m in inbox.of(FrameworkMessage)] == [str(i) for i in range(100)]
        assert tx.connections == 1


def _kinds_on_the_wire(payload: bytes) -> list[str]:
    """The message types a payload carries as sent (a batch's items; a list as one)."""
    raw = msgpack.unpackb(payload)
    if raw[1] == "Batch":
        return [kind for item in raw[3] for kind in _kinds_on_the_wire(item)]
    return [raw[1]]


@contextlib.asynccontextmanager
async def _watched(broker: Broker, topic: str) -> AsyncIterator[tuple[Bus, Inbox, list[str]]]:
    """A sender, and on `topic` a receiver's inbox and the kinds seen on the wire."""
    inbox = Inbox()
    wire: list[str] = []

    async def record(_topic: str, payload: bytes) -> None:
        wire.extend(_kinds_on_the_wire(payload))

    async with (
        Bus(broker.url, name="rx") as rx,
        Bus(broker.url, name="spy") as spy,
        Bus(broker.url, name="tx") as tx,
    ):
        await rx.subscribe(topic, inbox)
        await spy.subscribe_raw(topic, record)
        yield tx, inbox, wire


async def test_status_updates_posted_together_travel_as_lists_and_arrive_one_by_one_in_order(
    broker: Broker,
) -> None:
    def update(i: int) -> Update:
        return Update(status=TaskStatus(task_id=f"t{i}", state=TaskState.RUNNING, uuid=str(i)))

    async with _watched(broker, "fw") as (tx, inbox, wire):
        posted: list[Wire] = [Heartbeat(source="first")]  # (goes alone; the rest wait)
        posted += [update(i) for i in range(300)]  # more than one list holds
        posted += [Revive(framework_id="f"), update(300), update(301)]
        posted += [
            StatusAck(slave_id="s", framework_id="f", task_id="t", uuid=str(i)) for i in range(3)
        ]
        for message in posted:
            tx.post("fw", message)
        await inbox.wait_count(StatusAck, 3)
        assert [m for m, _ in inbox.messages] == posted  # each alone, in the order posted
        await eventually(lambda: len(wire) == 6)
        assert wire == ["Heartbeat", "Updates", "Updates", "Revive", "Updates", "StatusAcks"]


async def test_the_event_stream_travels_in_lists_and_arrives_one_by_one(broker: Broker) -> None:
    """Lazy posts (the master's events) wait unencoded and leave as one list, in order."""
    async with _watched(broker, "events") as (tx, inbox, wire):
        events = [
            ClusterEvent(kind="launch", task_id=f"t{i}", resources=Resources(cpus=0.1))
            for i in range(50)
        ]
        for event in events:
            tx.post("events", event, qos=0, lazy=True)
        await inbox.wait_count(ClusterEvent, 50)
        assert [m for m, _ in inbox.messages] == events
        await eventually(lambda: len(wire) == 1)
        assert wire == ["ClusterEvents"]


async def test_the_embedded_broker_delivers_every_message_while_clients_subscribe(
    tmp_path: Path,
) -> None:
    """amqtt 0.12.1 walked its subscriptions while awaiting its ACL plugin; a client that
    subscribed meanwhile made the walk fail, and the message never reached the
    subscriptions after that point, though its sender had its PUBACK."""
    churners = [f"c{i}" for i in range(40)]
    principals = [("tx", "framework"), ("all", "master"), ("rx", "master")]
    store = provision(tmp_path / "auth", [*principals, *((c, "framework") for c in churners)])
    broker = EmbeddedBroker(auth=store.path)
    await broker.start()
    topics = Topics("race")
    ping, inbox = topics.inbound("framework", "tx"), Inbox()

    def as_(name: str) -> Bus:
        return Bus(as_principal(broker.url, store, name), name=name)

    async def ignore(_m: Wire, _r: str | None) -> None:
        pass

    async def churn() -> None:
        async with contextlib.AsyncExitStack() as stack:
            for name in churners:
                bus = await stack.enter_async_context(as_(name))
                await bus.subscribe(topics.framework(name, "inbox"), ignore)

    try:
        async with as_("all") as first, as_("rx") as rx, as_("tx") as tx:
            await first.subscribe(topics.inbound_all, ignore)  # walked before rx's
            await rx.subscribe(ping, inbox)
            churning, sent = asyncio.create_task(churn()), 0
            while not churning.done():
                await tx.publish(ping, Heartbeat(source=str(sent)))  # (PUBACKed)
                sent += 1
            await churning
            await inbox.wait_count(Heartbeat, sent)
            assert [m.source for m in inbox.of(Heartbeat)] == [str(i) for i in range(sent)]
    finally:
        await broker.stop()


async def test_a_list_too_big_for_one_payload_leaves_as_several_in_order(broker: Broker) -> None:
    inbox = Inbox()
    text = "y" * (200 * 1024)
    async with Bus(broker.url, name="rx") as rx, Bus(broker.url, name="tx") as tx:
        await rx.subscribe("big", inbox)
        tx.post("big", Heartbeat(source="first"))
        for i in range(60):  # 12 MB of updates in one turn: one list cannot carry them
            status = TaskStatus(task_id=f"t{i}", state=TaskState.FAILED, message=text)
            tx.post("big", Update(status=status))
        await inbox.wait_count(Update, 60, timeout=60)
        assert [u.status.task_id for u in inbox.of(Update)] == [f"t{i}" for i in range(60)]
        assert tx.connections == 1


async def test_a_bus_that_never_started_leaves_nothing_running() -> None:
    """Cancelled while it connects (a Ctrl-C before the broker answered), `async with Bus`
    closes what it started: its connection loop was left retrying for good."""
    nobody = BrokerURL("127.0.0.1", free_port())

    async def opens() -> None:
        async with Bus(nobody, name="never"):
            raise AssertionError("there is no broker to connect to")

    opening = asyncio.create_task(opens())
    await eventually(lambda: any(t.get_name() == "bus-never" for t in asyncio.all_tasks()))
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await within(opening, 10)
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "bus-never" and not t.done()]


async def test_drfmesos_broker_leaves_no_temp_dir_behind() -> None:
    """`drfmesos broker --kind mosquitto`, stopped with Ctrl-C: its config and what it
    persisted go with it (87 such dirs were found in a tester's /tmp)."""
    need_mosquitto()
    command = [sys.executable, "-m", "cluster", "broker", "--kind", "mosquitto"]
    proc = await asyncio.create_subprocess_exec(
        *command, "--port", str(free_port()), stderr=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stderr is not None
        line = b"(its log lines come first)"
        while line and b"listening" not in line:
            line = await within(proc.stderr.readline(), 15)
        assert b"listening" in line
        conf = config_of_child(proc.pid)
        assert conf.parent.name.startswith("drfmesos-mosquitto-")
        assert conf.exists()
        proc.send_signal(signal.SIGINT)
        assert await within(proc.wait(), 15) == 0
        assert not conf.parent.exists()
    finally:
        await end_process(proc)  # (SIGTERM: it stops its mosquitto too; SIGKILL would not)


def config_of_child(pid: int) -> Path:
    """The config file (`-c`) of the process `pid` started."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    cmdlines = [Path(f"/proc/{c}/cmdline").read_bytes().split(b"\0") for c in children]
    return next(Path(c[c.index(b"-c") + 1].decode()) for c in cmdlines if b"-c" in c)
