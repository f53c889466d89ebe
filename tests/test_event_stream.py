"""The master's event stream on the bus goes out while an operator watches (a lease, as
Mesos streams events to its subscribers only): unwatched, a busy master published about a
third of its bytes a task to nobody."""

from __future__ import annotations

import contextlib
from pathlib import Path

import msgpack

from cluster.local.view import operator_call
from master.master import MasterConfig
from protocol.tooling.brokers import MosquittoBroker
from protocol.transport.bus import Bus
from protocol.wire.codec import PROTOCOL_VERSION
from protocol.wire.messages import ClusterEvent, Error, SetWeights, WatchEvents, Wire
from protocol.wire.topics import Topics

from helpers import Inbox, eventually, in_process_cluster, open_transport

CONFIG = MasterConfig(allocation_interval=0.1)


async def test_events_go_out_while_watched_and_stop_when_the_lease_ends(tmp_path: Path) -> None:
    async with (
        in_process_cluster("events", tmp_path, CONFIG, slaves=0) as c,
        contextlib.AsyncExitStack() as stack,
    ):
        shell = c.master.shell
        ops = c.topics.inbound("operator", "ops")
        operator = await open_transport(stack, c.connect, "ops", inbox=c.topics.operator("ops"))
        stream = Inbox()
        await operator.subscribe(c.topics.events, stream)

        async def weigh(weight: float) -> None:  # an operator's call that makes one event
            count = shell.event_counts["weights"]
            await operator.publish(ops, SetWeights(weights={"a": weight}))
            await eventually(lambda: shell.event_counts["weights"] == count + 1)

        await weigh(1)  # unwatched: not published
        await operator.publish(ops, WatchEvents(seconds=0.5))
        await weigh(2)  # watched
        # the lease ends (on the master's own clock), and the stream with it
        await eventually(lambda: shell.now() > shell.events_watched_until, timeout=5)
        await weigh(3)
        await operator.publish(ops, WatchEvents(seconds=60))  # watched again
        await weigh(4)
        # in order on the stream: had 1 or 3 gone out, they would have come before 2 or 4
        await stream.wait_count(ClusterEvent, 2)
        assert [e.detail for e in stream.of(ClusterEvent)] == ["a=2", "a=4"]
        assert shell.event_counts["weights"] == 4  # counted and kept, watched or not
        assert [e.detail for e in shell.recent_events if e.kind == "weights"][-1] == "a=4"


async def test_only_an_operator_may_watch_and_a_lease_is_bounded(tmp_path: Path) -> None:
    async with (
        in_process_cluster("events", tmp_path, CONFIG, slaves=0) as c,
        contextlib.AsyncExitStack() as stack,
    ):
        inbox = c.topics.outbox("framework", "tenant") + "/driver"
        tenant = await open_transport(stack, c.connect, "tenant", inbox=inbox)
        answers = Inbox()
        await tenant.subscribe(inbox, answers)
        await tenant.publish(c.topics.inbound("framework", "tenant"), WatchEvents())
        error = await answers.wait_for(Error)
        assert (error.code, error.about) == ("forbidden", "WatchEvents")
        assert c.master.shell.events_watched_until == 0

        ops = c.topics.operator("ops")
        operator = await open_transport(stack, c.connect, "ops", inbox=ops)
        told = Inbox()
        await operator.subscribe(ops, told)
        # a lease past the bound (ten minutes) is refused on arrival, as any invalid call
        endless = [PROTOCOL_VERSION, "WatchEvents", ops, {"seconds": 1e9}]
        await operator.publish_raw(c.topics.inbound("operator", "ops"), msgpack.packb(endless))
        invalid = await told.wait_for(Error)
        assert (invalid.code, invalid.about) == ("invalid", "WatchEvents")
        assert c.master.shell.events_watched_until == 0


async def test_an_operators_call_is_not_answered_by_its_leases_refusal(
    mosquitto: MosquittoBroker,
) -> None:
    """`operator_call` sends a lease, then the call: a refused lease (rate limited, or a
    master that does not know it) is not the call's answer; if the call's event then never
    shows, it says the outcome is unknown, and why."""
    topics = Topics("lease")
    refuse_call = False

    async def master(message: Wire, reply_to: str | None) -> None:  # answers, does nothing
        if isinstance(message, WatchEvents) or refuse_call:
            fake.reply_error(reply_to, "not now", code="rate-limited", about=message.TYPE)

    async with Bus(mosquitto.url, name="fake-master") as fake:
        await fake.subscribe(topics.inbound("operator", "+"), master)
        call = SetWeights(weights={"a": 2})
        why = await operator_call(mosquitto.url, "lease", call, lambda _e: True, timeout=0.5)
        assert why is not None
        assert why.startswith("its outcome is unknown: the master would not stream events")
        assert "rate-limited: not now" in why
        refuse_call = True  # now the call itself is refused: that is its answer
        why = await operator_call(mosquitto.url, "lease", call, lambda _e: True, timeout=10)
        assert why == "rate-limited: not now"
