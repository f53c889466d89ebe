"""What reaches a bus before its handler is subscribed is kept for that handler, in order.

A party with a persistent MQTT session (a slave process, the masters' one session) that
reconnects after a restart is sent, by the broker, the QoS 1 messages queued for it while
it was away as soon as it connects: before its code has subscribed or routed a handler
for its topics. They were dropped silently (a restarted slave never got the kill a
framework sent while it was down). The bus now holds them, bounded, for the handler
subscribed or routed for their topic; what nobody ever takes is dropped after a while,
said once per topic and counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from pathlib import Path

import pytest
import structlog

from master.master import Master, MasterConfig
from protocol.tooling.brokers import MosquittoBroker
from protocol.transport import unheard
from protocol.transport.bus import Bus
from protocol.transport.memory import MemoryBroker
from protocol.wire.codec import encode
from protocol.wire.messages import Error, Heartbeat, KillTask, Subscribe, Subscribed
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics
from slave.fleet import Fleet
from slave.slave import SlaveConfig

from harness.fakes import FakeFramework
from harness.helpers import Inbox, eventually

T = Topics("early")
QUEUED = 50


async def test_messages_queued_while_away_reach_a_handler_subscribed_after_the_reconnect(
    mosquitto: MosquittoBroker,
) -> None:
    """As a restarted slave process: its session kept its subscription at the broker, the
    broker sends what it queued the moment the bus connects, and the party subscribes its
    handler only a moment later. The handler gets every queued message, in order, and
    what is sent afterwards behind them."""
    topic = T.slave("rack1", "s1")
    async with Bus(mosquitto.url, name="rx", client_id="rx-early", persistent=True) as rx:
        await rx.subscribe(topic, Inbox())  # the session and its subscription
    async with Bus(mosquitto.url, name="tx") as tx:
        for i in range(QUEUED):  # while it is away: queued in its session
            await tx.publish(topic, Heartbeat(source=str(i)), timeout=10)

        inbox = Inbox()
        async with Bus(mosquitto.url, name="rx", client_id="rx-early", persistent=True) as rx:
            # every queued message has reached the bus before any handler is there ...
            await eventually(lambda: rx.stats["payloads_in"] >= QUEUED)
            await rx.subscribe(topic, inbox)  # ... as the slave subscribes, after connecting
            await tx.publish(topic, Heartbeat(source="after"), timeout=10)
            await inbox.wait_count(Heartbeat, QUEUED + 1)
            sources = [m.source for m in inbox.of(Heartbeat)]
            assert sources == [str(i) for i in range(QUEUED)] + ["after"]
            assert rx.messages.outcomes[("Heartbeat", "handled", "")] == QUEUED + 1


async def test_a_kill_sent_while_a_fleet_was_away_reaches_its_slave_after_the_restart(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    """A slave process (a fleet of logical slaves on one persistent session) restarts; a
    KillTask sent to one of its slaves meanwhile waits in the session, arrives before the
    fleet has its slaves, and is handled by that slave once it has started (it answers
    that it has no such task), not dropped as for no slave of the process."""
    url = dataclasses.replace(mosquitto.url, username="rack1")
    config = SlaveConfig(
        slave_id="s1",
        hostname="h1",
        resources=Resources(cpus=1, mem=256),
        work_dir=tmp_path / "s1",
        simulated_tasks=True,
        cluster=T.cluster,
        in_fleet=True,
    )

    async def run_fleet(bus: Bus) -> tuple[Fleet, asyncio.Task[None]]:
        # as slave.cli.run_slaves: the bus connects, then the fleet starts its slaves
        fleet = Fleet(bus, T, "rack1")
        return fleet, asyncio.create_task(fleet.run([config]))

    def fleet_bus() -> Bus:
        return Bus(
            url, name="fleet", client_id="early-fleet", inbox=T.outbox("slave", "rack1"),
            persistent=True,
        )  # fmt: skip

    answers = Inbox()
    async with contextlib.AsyncExitStack() as stack:
        asker = await stack.enter_async_context(
            Bus(mosquitto.url, name="asker", inbox=T.operator("asker"))
        )
        await asker.subscribe(T.operator("asker"), answers)
        kill = KillTask(framework_id="f", task_id="t")
        async with fleet_bus() as bus:
            fleet, running = await run_fleet(bus)
            try:  # started (it asks to register): its session holds the subscription
                await eventually(lambda: len(fleet.registrations.pending) == 1)
                await asker.publish(T.slave("rack1", "s1"), kill)
                await answers.wait_count(Error, 1, timeout=30)
            finally:
                await stop(running)
        # the process is down: the kill waits in its session
        await asker.publish(T.slave("rack1", "s1"), kill)
        with structlog.testing.capture_logs() as said:
            async with fleet_bus() as bus:
                _, running = await run_fleet(bus)
                try:
                    errors = await answers.wait_count(Error, 2, timeout=30)
                finally:
                    await stop(running)
        error = errors[1]
        assert error.code == "unknown-task"  # handled by the slave itself
        assert "slave s1" in error.message
        assert not [line for line in said if line["event"] == "fleet.unrouted"]


async def test_a_call_queued_while_no_master_led_is_answered_by_the_next_one(
    mosquitto: MosquittoBroker,
) -> None:
    """Every master of a cluster takes over one persistent session, so that calls sent
    while nobody leads wait for the next leader. They reach its bus as it connects, while
    it still loads its registry, before the master subscribes: the next leader answers
    them."""

    def master_bus() -> Bus:
        return Bus(mosquitto.url, name="master", client_id="early-master", persistent=True)

    async with master_bus() as bus:  # a leader, that goes away
        master = Master(bus, T, MasterConfig())
        await master.start()
        await master.stop()
    async with Bus(mosquitto.url, name="fw", inbox=T.framework("framework", "fw")) as fw_bus:
        fw = FakeFramework(fw_bus, T, "fw")
        await fw_bus.subscribe(T.framework("framework", "fw"), fw.receive)
        subscribe = Subscribe(name="fw", inbox="fw", incarnation=fw_bus.incarnation)
        await fw_bus.publish(fw.to_master, subscribe)  # while nobody leads
        async with master_bus() as bus:  # the next leader connects ...
            await eventually(lambda: bus.stats["payloads_in"] >= 1)
            master = Master(bus, T, MasterConfig())  # ... and only then subscribes
            await master.start()
            try:
                subscribed = await fw.inbox.wait_for(Subscribed, timeout=10)
            finally:
                await master.stop()
        assert subscribed.framework_id in master.books.frameworks


async def test_the_in_process_transport_keeps_them_for_their_handler_too() -> None:
    """The in-process transport (the fleet and slave tests run on it) does as the bus."""
    broker = MemoryBroker()
    async with broker.connector(None)(name="rx") as rx:
        for i in range(QUEUED):  # arrived with no handler for them yet
            rx.arrive(T.slave("rack1", "s1"), encode(Heartbeat(source=str(i))))
        await eventually(lambda: rx.stats["payloads_in"] >= QUEUED)
        inbox = Inbox()
        rx.route(T.slave("rack1", "s1"), inbox)
        await inbox.wait_count(Heartbeat, QUEUED)
        assert [m.source for m in inbox.of(Heartbeat)] == [str(i) for i in range(QUEUED)]


async def test_what_is_handed_back_keeps_its_arrival_order_across_topics() -> None:
    """Two topics' messages kept, their handlers subscribed in the other order: handed
    back in the order they arrived (a slave's last will after its registration, say)."""
    broker = MemoryBroker()
    async with broker.connector(None)(name="rx") as rx:
        for i in range(10):
            rx.arrive(f"t/{i % 2}", encode(Heartbeat(source=str(i))))
        await eventually(lambda: rx.stats["payloads_in"] >= 10)
        inbox = Inbox()
        await rx.subscribe("t/1", inbox)
        await rx.subscribe("t/0", inbox)
        await inbox.wait_count(Heartbeat, 10)
        assert [m.source for m in inbox.of(Heartbeat)] == [str(i) for i in range(10)]


async def test_what_nobody_takes_is_dropped_in_time_said_once_a_topic_and_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A message for a topic no handler ever takes is not kept for ever: after a while it
    is dropped, counted by type, and said once for its topic (not once a message)."""
    monkeypatch.setattr(unheard, "HOLD_FOR", 0.2)
    broker = MemoryBroker()
    async with broker.connector(None)(name="rx") as rx:
        with structlog.testing.capture_logs() as said:
            for i in range(QUEUED):
                rx.arrive("nobody/x", encode(Heartbeat(source=str(i))))
            await eventually(
                lambda: rx.messages.outcomes[("Heartbeat", "dropped", "unheard")] == QUEUED
            )
            rx.arrive("nobody/x", encode(Heartbeat(source="later")))  # a flood goes on
            await eventually(
                lambda: rx.messages.outcomes[("Heartbeat", "dropped", "unheard")] == QUEUED + 1
            )
        lines = [line for line in said if line["event"] == "bus.unheard_dropped"]
        assert len(lines) == 1
        assert lines[0]["topic"] == "nobody/x"


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.wait({task}, timeout=30)
    assert task.done(), "the fleet did not stop when cancelled"
