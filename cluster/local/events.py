"""Following the master's event stream on the bus (`drfmesos events`).

The master publishes its events only while an operator holds a lease on them
(`WatchEvents`, as Mesos streams events to its subscribers only). A follower takes one,
renews it at half its length, and takes one again from each new leader (a lease is the
master's, not the registry's: a failover starts unwatched)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import UTC, datetime

from protocol.tooling.brokers import BrokerURL
from protocol.transport.aio import within
from protocol.transport.bus import Bus
from protocol.transport.leader import LeaderWatch
from protocol.wire.messages import ClusterEvent, Error, Leader, WatchEvents, Wire
from protocol.wire.topics import Topics

LEASE = 60.0  # seconds a lease lasts; renewed every half of it
DROPS_TO_SAY = 3  # connections, none of them with an event, before `on_dropped` is told


async def follow_events(
    url: BrokerURL,
    cluster: str,
    on_event: Callable[[ClusterEvent], None],
    stop: asyncio.Event,
    *,
    lease: float = LEASE,
    on_refused: Callable[[Error], None] = lambda _error: None,
    on_dropped: Callable[[], None] = lambda: None,
) -> None:
    """Hand each event of `cluster`'s stream to `on_event` until `stop` is set; a master's
    refusal of the lease (rate limited) goes to `on_refused`; `on_dropped` is called once
    if the connection is lost again and again before any event came (the broker drops a
    principal that may not take a lease, or one whose name another connection took)."""
    topics = Topics(cluster)
    principal = url.username or "operator"
    calls = topics.inbound("operator", principal)

    heard = False

    async def on_stream(message: Wire, _reply_to: str | None) -> None:
        nonlocal heard
        if isinstance(message, ClusterEvent):
            heard = True
            on_event(message)

    async def on_answer(message: Wire, _reply_to: str | None) -> None:
        if isinstance(message, Error) and message.about == WatchEvents.TYPE:
            on_refused(message)

    async with Bus(url, name="events", inbox=topics.operator(principal)) as bus:

        def renew() -> None:
            bus.post(calls, WatchEvents(seconds=lease))

        async def new_leader(_leader: Leader) -> None:
            renew()

        async def reconnected() -> None:
            if bus.connections == DROPS_TO_SAY and not heard:
                on_dropped()

        bus.on_connect(reconnected)
        await bus.subscribe(topics.operator(principal), on_answer)
        await bus.subscribe(topics.events, on_stream)
        await LeaderWatch.on(bus, topics, new_leader)
        while not stop.is_set():
            renew()
            with contextlib.suppress(TimeoutError):
                await within(stop.wait(), lease / 2)


def event_line(event: ClusterEvent) -> str:
    """One event as a line: its kind, then what it names."""
    named = [
        f"{name}={value}"
        for name, value in (
            ("framework", event.framework_id),
            ("slave", event.slave_id),
            ("task", event.task_id),
            ("offer", event.offer_id),
            ("state", event.state.value if event.state is not None else None),
        )
        if value is not None
    ]
    if event.resources:
        named.append(f"resources={event.resources}")
    if event.detail:
        named.append(event.detail)
    when = datetime.fromtimestamp(event.timestamp, UTC).isoformat(timespec="milliseconds")
    return " ".join([when.replace("+00:00", "Z"), event.kind, *named])
