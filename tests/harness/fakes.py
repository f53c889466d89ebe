"""Bare protocol speakers for testing the master: a framework and a slave with no SDK.

They send exactly the messages a test tells them to and record everything that arrives,
so a test can check the master's side of the protocol message by message.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from protocol.tooling.brokers import BrokerURL
from protocol.transport.base import Transport
from protocol.transport.bus import Bus
from protocol.wire.discrete import EMPTY, Discrete
from protocol.wire.messages import (
    Accept,
    Acknowledge,
    CommandInfo,
    Decline,
    Filters,
    FrameworkShutDown,
    Heartbeat,
    Offer,
    OfferOperation,
    Offers,
    Register,
    RunTask,
    RunTasks,
    ShutdownFramework,
    StatusUpdate,
    Subscribe,
    Subscribed,
    TaskInfo,
    TaskState,
    TaskStatus,
    Update,
    Wire,
    new_id,
)
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics
from protocol.wire.values import KillPolicy

from harness.helpers import Inbox


class FakeFramework:
    """`acknowledging`: it acknowledges each status update as it arrives, as a framework
    must for its slave to send the task's next one (subscribe `receive`, not `inbox`)."""

    def __init__(
        self, bus: Transport, topics: Topics, inbox_id: str, *, acknowledging: bool = False
    ) -> None:
        self.bus, self.topics, self.inbox_id = bus, topics, inbox_id
        self.principal = bus.principal or "framework"
        self.to_master = topics.inbound("framework", self.principal)
        self.inbox = Inbox()
        self.framework_id = ""
        self.acknowledging = acknowledging

    async def receive(self, message: Wire, reply_to: str | None) -> None:
        await self.inbox(message, reply_to)
        if self.acknowledging and isinstance(message, Update) and message.status.uuid:
            await self.acknowledge(message.status)

    async def subscribe(self, name: str, **kw: object) -> Subscribed:
        await self.bus.publish(
            self.to_master,
            Subscribe(name=name, inbox=self.inbox_id, incarnation=self.bus.incarnation, **kw),
        )
        sub = await self.inbox.wait_for(Subscribed)
        self.framework_id = sub.framework_id
        return sub

    async def next_offer(self, after: int = 0, timeout: float = 10.0) -> Offer:
        """The first offer beyond the first `after` offers received."""

        def offers() -> list[Offer]:
            return [o for batch in self.inbox.of(Offers) for o in batch.offers]

        await self.inbox.wait_for(Offers, lambda _: len(offers()) > after, timeout)
        return offers()[after]

    def offer_count(self) -> int:
        return sum(len(b.offers) for b in self.inbox.of(Offers))

    def task(self, offer: Offer, resources: Resources, task_id: str | None = None) -> TaskInfo:
        return TaskInfo(
            task_id=task_id or f"t-{new_id()[:8]}",
            name="test",
            slave_id=offer.slave_id,
            resources=resources,
            command=CommandInfo(value="sleep 1"),
        )

    async def accept(self, offer: Offer, tasks: list[TaskInfo], refuse: float = 5.0) -> None:
        await self.bus.publish(
            self.to_master,
            Accept(
                framework_id=self.framework_id,
                offer_ids=[offer.offer_id],
                tasks=tasks,
                filters=Filters(refuse_seconds=refuse),
            ),
        )

    async def acknowledge(self, status: TaskStatus) -> None:
        await self.bus.publish(
            self.to_master,
            Acknowledge(
                framework_id=self.framework_id,
                slave_id=status.slave_id or "",
                task_id=status.task_id,
                uuid=status.uuid or "",
            ),
        )

    async def decline(self, offer: Offer, refuse: float = 5.0) -> None:
        await self.bus.publish(
            self.to_master,
            Decline(
                framework_id=self.framework_id,
                offer_ids=[offer.offer_id],
                filters=Filters(refuse_seconds=refuse),
            ),
        )

    def heard(self, task_id: str, state: TaskState) -> bool:
        """Whether an update of `task_id` in `state` has arrived."""
        return any(
            (u.status.task_id, u.status.state) == (task_id, state) for u in self.inbox.of(Update)
        )

    async def update_for(
        self, task_id: str, state: TaskState, timeout: float = 10.0, *, after: int = 0
    ) -> TaskStatus:
        """The first update of `task_id` in `state` beyond the first `after` updates."""

        def found() -> Update | None:
            return next(
                (
                    u
                    for u in self.inbox.of(Update)[after:]
                    if u.status.task_id == task_id and u.status.state == state
                ),
                None,
            )

        await self.inbox.wait_until(lambda: found() is not None, timeout)
        u = found()
        assert u is not None
        return u.status


async def operate(fw: FakeFramework, offer: Offer, *ops: OfferOperation) -> None:
    """Accept an offer with operations and no task, refusing the rest for no time."""
    await fw.bus.publish(
        fw.to_master,
        Accept(
            framework_id=fw.framework_id,
            offer_ids=[offer.offer_id],
            operations=list(ops),
            filters=Filters(refuse_seconds=0),
        ),
    )


def graceful_tasks(
    fw: FakeFramework, offer: Offer, resources: Resources, prefix: str, n: int
) -> list[TaskInfo]:
    """`n` tasks of `resources` (`prefix`0, `prefix`1, ...) whose kill policy gives them 60 s
    of grace: killed, they die slowly."""
    return [
        fw.task(offer, resources, f"{prefix}{i}").model_copy(
            update={"kill_policy": KillPolicy(grace_period=60)}
        )
        for i in range(n)
    ]


def offered(m: FakeFramework, b: FakeFramework, seen: tuple[int, int]) -> bool:
    """Whether `m` or `b` was offered anything since their offer counts were `seen`."""
    return (m.offer_count(), b.offer_count()) != seen


class FakeSlave:
    """Registers, heartbeats on request, and records what the master tells it."""

    def __init__(
        self,
        bus: Transport,
        topics: Topics,
        slave_id: str,
        resources: Resources,
        discrete: Discrete = EMPTY,
    ) -> None:
        self.bus, self.topics, self.slave_id, self.resources = bus, topics, slave_id, resources
        self.discrete = discrete
        self.principal = bus.principal or "slave"
        self.to_master = topics.inbound("slave", self.principal)
        self.inbox = Inbox()
        self._runs_handled = 0
        # a framework shut down here: its tasks ended at once, as the master is told (a
        # test of tasks in their kill grace sets it False)
        self.ends_shut_down_frameworks = True

    async def _hear(self, message: Wire, reply_to: str | None) -> None:
        await self.inbox(message, reply_to)
        if isinstance(message, ShutdownFramework) and self.ends_shut_down_frameworks:
            done = FrameworkShutDown(framework_id=message.framework_id, slave_id=self.slave_id)
            await self.bus.publish(self.to_master, done)

    async def register(self) -> None:
        await self.bus.subscribe(self.topics.slave(self.principal, self.slave_id), self._hear)
        await self.bus.publish(
            self.to_master,
            Register(
                slave_id=self.slave_id,
                hostname=f"{self.slave_id}.local",
                resources=self.resources,
                discrete=self.discrete,
                incarnation=self.bus.incarnation,
            ),
        )

    async def heartbeat(self) -> None:
        await self.bus.publish(
            self.to_master, Heartbeat(source=self.slave_id, incarnation=self.bus.incarnation)
        )

    async def report(self, framework_id: str, task_id: str, state: TaskState) -> str:
        """Send a status update that needs acknowledging; returns its uuid."""
        uuid = new_id()
        status = TaskStatus(task_id=task_id, state=state, slave_id=self.slave_id, uuid=uuid)
        await self.bus.publish(
            self.to_master,
            StatusUpdate(framework_id=framework_id, slave_id=self.slave_id, status=status),
        )
        return uuid

    def runs(self) -> list[RunTask]:
        """Every task the master sent to run here, in order (RunTasks carry several)."""
        return [run for message in self.inbox.of(RunTasks) for run in message.each()]

    async def run_task(self) -> RunTask:
        """Take the next task to run not yet handled and report it RUNNING."""
        seen = self._runs_handled
        await self.inbox.wait_until(lambda: len(self.runs()) > seen)
        run = self.runs()[seen]
        self._runs_handled += 1
        await self.report(run.framework_id, run.task.task_id, TaskState.RUNNING)
        return run


@contextlib.asynccontextmanager
async def party(url: BrokerURL, name: str, topics: Topics, **kw: object) -> AsyncIterator[Bus]:
    inbox = topics.framework(url.username or "framework", name)
    async with Bus(url, name=name, inbox=inbox, **kw) as bus:  # type: ignore[arg-type]
        yield bus


@contextlib.asynccontextmanager
async def heartbeating(slave: FakeSlave, every: float = 0.2) -> AsyncIterator[None]:
    """`slave` heartbeats every `every` seconds meanwhile, as a live slave does (it stays)."""

    async def beat() -> None:
        while True:
            await slave.heartbeat()
            await asyncio.sleep(every)

    beating = asyncio.create_task(beat())
    try:
        yield
    finally:
        beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beating


def told_to_shut_down(slave: FakeSlave, framework_id: str) -> Callable[[], bool]:
    """Whether `slave` has been told to shut `framework_id` down since this call."""
    shutdowns = len(slave.inbox.of(ShutdownFramework))
    return lambda: any(
        s.framework_id == framework_id for s in slave.inbox.of(ShutdownFramework)[shutdowns:]
    )
