"""Following the master's event stream on the bus (`drfmesos events`).

The master publishes its events only while an operator holds a lease on them
(`WatchEvents`, as Mesos streams events to its subscribers only). A follower takes one,
renews it at half its length, and takes one again from each new leader (a lease is the
master's, not the registry's: a failover starts unwatched)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime

from protocol.tooling.brokers import BrokerURL
from protocol.transport.aio import first_of
from protocol.transport.bus import Bus
from protocol.transport.leader import LeaderWatch
from protocol.wire.messages import ClusterEvent, Error, Leader, WatchEvents, Wire
from protocol.wire.topics import Topics

LEASE = 60.0  # seconds a lease lasts; renewed every half of it
SHORT_CONNECTION = 5.0  # seconds: a connection that ended this soon after a renewal
SHORT_RUN = 2  # such connections in a row, with no event, before `on_dropped` is told


async def follow_events(
    url: BrokerURL,
    cluster: str,
    on_event: Callable[[ClusterEvent], None],
    stop: asyncio.Event,
    *,
    lease: float = LEASE,
    on_refused: Callable[[Error], None] = lambda _error: None,
    on_dropped: Callable[[], None] = lambda: None,
    tries: int | None = None,
) -> None:
    """Hand each event of `cluster`'s stream to `on_event` until `stop` is set (while it
    connects too); a master's refusal of the lease (rate limited) goes to `on_refused`;
    `on_dropped` is called once if connections keep ending within seconds before any
    event came (the broker drops a principal that may not take a lease, or one whose
    name another connection took). Raises BusRefused if the broker stops letting it in, and
    BrokerUnreachable after `tries` failed attempts to connect (else 30 s of them)."""
    following = asyncio.create_task(
        _follow(url, cluster, on_event, stop, lease, on_refused, on_dropped, tries)
    )
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({following, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        while not following.done():  # stopped, or cancelled itself: its bus closes
            following.cancel()  # (again only if aiomqtt's connect lost it: see `within`)
            await asyncio.wait({following}, timeout=5)
    if not following.cancelled():
        following.result()


async def _follow(
    url: BrokerURL,
    cluster: str,
    on_event: Callable[[ClusterEvent], None],
    stop: asyncio.Event,
    lease: float,
    on_refused: Callable[[Error], None],
    on_dropped: Callable[[], None],
    tries: int | None,
) -> None:
    topics = Topics(cluster)
    principal = url.username or "operator"
    calls = topics.inbound("operator", principal)
    heard, short, last_renewal = False, 0, None

    async def on_stream(message: Wire, _reply_to: str | None) -> None:
        nonlocal heard
        if isinstance(message, ClusterEvent):
            heard = True
            on_event(message)

    async def on_answer(message: Wire, _reply_to: str | None) -> None:
        if isinstance(message, Error) and message.about == WatchEvents.TYPE:
            on_refused(message)

    bus = Bus(url, name="events", inbox=topics.operator(principal))
    try:
        await bus.start(tries=tries)
        loop = asyncio.get_running_loop()

        def renew() -> None:
            nonlocal last_renewal
            last_renewal = loop.time()
            bus.post(calls, WatchEvents(seconds=lease))

        async def new_leader(_leader: Leader) -> None:
            renew()

        async def reconnected() -> None:
            """Renew at once (the lease may have lapsed meanwhile). The broker drops a
            principal that publishes what it may not: connections that end within
            seconds of a renewal, in a row, with no event heard, were dropped for it."""
            nonlocal short
            now = loop.time()
            dropped = last_renewal is not None and now - last_renewal < SHORT_CONNECTION
            short = short + 1 if dropped else 0
            if short == SHORT_RUN and not heard:
                on_dropped()
            if short < SHORT_RUN:  # (else it would be dropped again at once, for good)
                renew()

        bus.on_connect(reconnected)
        await bus.subscribe(topics.operator(principal), on_answer)
        await bus.subscribe(topics.events, on_stream)
        await LeaderWatch.on(bus, topics, new_leader)
        while not stop.is_set() and not bus.gave_up.is_set():
            renew()  # (again once subscribed: a renewal sent before may have been lost)
            await first_of(stop, bus.gave_up, timeout=lease / 2)
        if bus.refused is not None:
            raise bus.refused
    finally:
        await bus.close()


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
