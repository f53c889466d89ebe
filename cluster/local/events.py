"""Following the master's event stream on the bus (`drfmesos events`).

The master publishes its events only while an operator holds a lease on them
(`WatchEvents`, as Mesos streams events to its subscribers only). A follower takes one,
renews it at half its length, and takes one again from each new leader (a lease is the
master's, not the registry's: a failover starts unwatched).

The master answers each renewal (`Watching`). A follower whose renewals go unanswered
while a leader is known was not heard: the broker drops what a principal may not publish
(a lease from one that is not an operator) and MQTT 3.1.1 tells the sender nothing. What it
missed it learns from the events' numbers: a follower that fell behind by more than the
broker holds for one client (`brokers.QueueBounds`) had the rest dropped."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from protocol.tooling.brokers import BrokerURL
from protocol.tooling.terminal import printable
from protocol.transport.aio import first_of
from protocol.transport.base import BusRefused
from protocol.transport.bus import Bus
from protocol.transport.leader import LeaderWatch
from protocol.wire.messages import ClusterEvent, Error, Leader, WatchEvents, Watching, Wire
from protocol.wire.topics import Topics

LEASE = 60.0  # seconds a lease lasts; renewed every half of it
SHORT_CONNECTION = 5.0  # seconds: a connection that ended this soon after a renewal
SHORT_RUN = 2  # such connections in a row, with no event, before `on_dropped` is told
LEASE_ANSWER = 10.0  # seconds a master has to answer a renewal (Watching)
UNANSWERED_RUN = 2  # renewals in a row unanswered, with a leader known: not heard


async def follow_events(
    url: BrokerURL,
    cluster: str,
    on_event: Callable[[ClusterEvent], None],
    stop: asyncio.Event,
    *,
    lease: float = LEASE,
    on_refused: Callable[[Error], None] = lambda _error: None,
    on_dropped: Callable[[], None] = lambda: None,
    on_missed: Callable[[int], None] = lambda _count: None,
    tries: int | None = None,
) -> None:
    """Hand each event of `cluster`'s stream to `on_event` until `stop` is set (while it
    connects too); a master's refusal of the lease (rate limited) goes to `on_refused`;
    `on_missed` is told how many events were skipped before one that came (this
    follower fell behind and the broker dropped them); `on_dropped` is called once if
    connections keep ending within seconds before any event came (another connection
    took this one's name). Raises StreamRefused if this principal may not read the stream,
    BusRefused if the broker stops letting it in, and BrokerUnreachable after `tries`
    failed attempts to connect (else 30 s of them)."""
    told = Told(on_event, on_refused, on_dropped, on_missed)
    following = asyncio.create_task(_follow(url, cluster, told, stop, lease, tries))
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


class StreamRefused(BusRefused):
    """The master never heard this principal's leases (the broker drops them: not an
    operator)."""


@dataclass(frozen=True)
class Told:
    """Whom a follower tells what (see `follow_events`)."""

    event: Callable[[ClusterEvent], None]
    refused: Callable[[Error], None]
    dropped: Callable[[], None]
    missed: Callable[[int], None]


class Gaps:
    """The events a follower missed, from their numbers (one master's count: a new leader
    counts from its own)."""

    def __init__(self, missed: Callable[[int], None]) -> None:
        self.missed = missed
        self.last = 0

    def saw(self, event: ClusterEvent) -> None:
        if not event.seq:
            return
        if self.last and event.seq > self.last + 1:
            self.missed(event.seq - self.last - 1)
        self.last = max(self.last, event.seq)

    def new_leader(self) -> None:
        self.last = 0


async def _follow(
    url: BrokerURL,
    cluster: str,
    told: Told,
    stop: asyncio.Event,
    lease: float,
    tries: int | None,
) -> None:
    topics = Topics(cluster)
    principal = url.username or "operator"
    calls = topics.inbound("operator", principal)
    heard, short, last_renewal = False, 0, None
    gaps = Gaps(told.missed)
    answered = asyncio.Event()  # the master answered the last renewal of the lease

    async def on_stream(message: Wire, _reply_to: str | None) -> None:
        nonlocal heard
        if isinstance(message, ClusterEvent):
            heard = True
            gaps.saw(message)
            told.event(message)

    async def on_answer(message: Wire, _reply_to: str | None) -> None:
        if isinstance(message, Watching):
            answered.set()
        elif isinstance(message, Error) and message.about == WatchEvents.TYPE:
            answered.set()  # (refused by the master, so heard)
            told.refused(message)

    bus = Bus(url, name="events", inbox=topics.operator(principal))
    try:
        await bus.start(tries=tries)
        loop = asyncio.get_running_loop()

        def renew() -> None:
            nonlocal last_renewal
            last_renewal = loop.time()
            answered.clear()
            bus.post(calls, WatchEvents(seconds=lease))

        async def new_leader(_leader: Leader) -> None:
            gaps.new_leader()
            renew()

        async def reconnected() -> None:
            """Renew at once (the lease may have lapsed meanwhile). Connections that end
            within seconds of a renewal, in a row, with no event heard, were taken over
            by another connection as this principal."""
            nonlocal short
            now = loop.time()
            dropped = last_renewal is not None and now - last_renewal < SHORT_CONNECTION
            short = short + 1 if dropped else 0
            if short == SHORT_RUN and not heard:
                told.dropped()
            if short < SHORT_RUN:  # (else it would be dropped again at once, for good)
                renew()

        bus.on_connect(reconnected)
        await bus.subscribe(topics.operator(principal), on_answer)
        await bus.subscribe(topics.events, on_stream)
        watch = await LeaderWatch.on(bus, topics, new_leader)
        unanswered = 0
        while not stop.is_set() and not bus.gave_up.is_set():
            connection = bus.connections
            renew()  # (again once subscribed: a renewal sent before may have been lost)
            await first_of(stop, bus.gave_up, answered, timeout=LEASE_ANSWER)
            if answered.is_set() or watch.leader is None or bus.connections != connection:
                unanswered = 0  # (no master to answer, or a new connection: not a refusal)
                since = loop.time() - (last_renewal or 0.0)
                await first_of(stop, bus.gave_up, timeout=max(0.0, lease / 2 - since))
            elif (unanswered := unanswered + 1) == UNANSWERED_RUN:
                raise StreamRefused(
                    f"the master of cluster {cluster!r} answered none of {UNANSWERED_RUN} "
                    f"leases on its event stream from principal {principal!r} in "
                    f"{LEASE_ANSWER:g} s each: the broker drops them, and the master's "
                    "answers, for a principal that is not an operator (following the "
                    "stream takes an operator principal)"
                )
        if bus.refused is not None:
            raise bus.refused
    finally:
        await bus.close()


def event_line(event: ClusterEvent) -> str:
    """One event as a line: its kind, then what it names. Its ids and its detail are
    tenants' text (an id a refused call named, the words quoting it), printed as text: a
    character a terminal would obey is escaped, and a space in an id too (an id holds
    none, so one would fake the fields after it)."""
    named = [
        f"{name}={printable(value, spaces=False)}"
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
        named.append(f"resources={printable(str(event.resources))}")
    if event.detail:
        named.append(printable(event.detail))
    when = datetime.fromtimestamp(event.timestamp, UTC).isoformat(timespec="milliseconds")
    return " ".join([when.replace("+00:00", "Z"), printable(event.kind), *named])
