"""A fleet paces its slaves' (re-)registrations in one loop (slave.registrations): a new
leader behind in its reading is not sent second copies of what it has not read yet, and
what it lost or refused is still sent again."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from pathlib import Path

from protocol.transport.base import Transport
from protocol.transport.memory import MemoryBroker
from protocol.wire.messages import Leader, Register, Registered, Reregister, Wire
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics
from slave.fleet import Fleet
from slave.registrations import Registrations
from slave.slave import SlaveConfig

from harness.helpers import eventually, open_transport

T = Topics("pace")


class SlowMaster:
    """A master that reads the fleet's (re-)registrations in order, `per_call` seconds
    each, and answers each but those of `refuses` (as a master refusing a slave)."""

    def __init__(self, bus: Transport, per_call: float, refuses: set[str] | None = None) -> None:
        self.bus, self.per_call, self.refuses = bus, per_call, refuses or set()
        self.read: Counter[str] = Counter()  # attempts read, by slave
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self.answering = True
        self.epoch = 1  # what its answers say
        self.idle = True  # (nothing read and not answered yet)

    async def arrive(self, message: Wire, _reply_to: str | None) -> None:
        if isinstance(message, Register | Reregister):
            self.queue.put_nowait(message.slave_id)

    async def run(self) -> None:
        while True:
            self.idle = True
            slave_id = await self.queue.get()
            self.idle = False
            await asyncio.sleep(self.per_call)
            if not self.answering:
                continue  # (gone: what it had not read is lost with it)
            self.read[slave_id] += 1
            if slave_id not in self.refuses:
                epoch = self.epoch
                answer = Registered(slave_id=slave_id, heartbeat_interval_seconds=60, epoch=epoch)
                await self.bus.publish(T.slave("rack1", slave_id), answer)


async def slow_cluster(
    stack: contextlib.AsyncExitStack, work: Path, count: int, master: SlowMaster | None = None
) -> tuple[Fleet, SlowMaster, Transport]:
    broker = MemoryBroker()
    bus = await open_transport(stack, broker.connector(None), "master")
    slow = master or SlowMaster(bus, 0.0)
    slow.bus = bus
    await bus.subscribe(T.inbound("slave", "rack1"), slow.arrive)
    runner = asyncio.create_task(slow.run())
    stack.callback(runner.cancel)
    fleet_bus = await open_transport(
        stack, broker.connector("rack1"), "fleet", inbox=T.outbox("slave", "rack1")
    )
    fleet = Fleet(fleet_bus, T, "rack1")  # type: ignore[arg-type]
    configs = [
        SlaveConfig(
            slave_id=f"s{i:03d}",
            hostname=f"h{i}",
            resources=Resources(cpus=1, mem=1024),
            work_dir=work / f"s{i:03d}",
            simulated_tasks=True,
            cluster=T.cluster,
            registration_backoff_factor=0.0,  # (every first attempt at once; retries 0.5-1 s)
            in_fleet=True,
        )
        for i in range(count)
    ]
    running = asyncio.create_task(fleet.run(configs))

    async def stop() -> None:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running

    stack.push_async_callback(stop)
    await eventually(lambda: registered(fleet) == count, timeout=30)
    return fleet, slow, bus


def registered(fleet: Fleet) -> int:
    return sum(s.registered.is_set() for s in fleet.slaves)


async def test_a_new_leader_behind_in_its_reading_gets_each_slave_once(tmp_path: Path) -> None:
    """40 slaves re-register with a new leader that reads one a 50 ms: the last is read
    2 s on, past every slave's retry time (0.5-1 s). While the leader answers what the
    process sent before a slave's attempt, that attempt is in its backlog: not sent again.
    Every slave is back, each read once."""
    async with contextlib.AsyncExitStack() as stack:
        fleet, slow, master = await slow_cluster(stack, tmp_path, 40)
        slow.read.clear()
        slow.per_call, slow.epoch = 0.05, 2
        await master.publish(T.leader, Leader(master_id="m2", epoch=2), retain=True)
        await eventually(lambda: registered(fleet) < 40)
        await eventually(lambda: registered(fleet) == 40, timeout=30)
        await eventually(lambda: slow.idle and slow.queue.empty())  # (all it was sent, read)
        assert sum(slow.read.values()) == 40, slow.read.most_common(3)
        assert set(slow.read) == {s.slave_id for s in fleet.slaves}
        assert fleet.registrations.held > 0  # (retries came due, and were held)


async def test_an_attempt_the_leader_passed_or_lost_is_sent_again(tmp_path: Path) -> None:
    """What the leader did not answer while it answered what was sent with or after it
    (refused, lost) goes again at its backoff's time; and so does everything once the
    leader stops answering (gone with its backlog)."""
    async with contextlib.AsyncExitStack() as stack:
        fleet, slow, master = await slow_cluster(stack, tmp_path, 10)
        slow.read.clear()
        slow.refuses, slow.epoch = {"s003"}, 2
        await master.publish(T.leader, Leader(master_id="m2", epoch=2), retain=True)
        await eventually(lambda: slow.read["s003"] >= 3, timeout=10)
        assert all(slow.read[s.slave_id] == 1 for s in fleet.slaves if s.slave_id != "s003")

        slow.refuses = set()
        slow.answering, slow.epoch = False, 3  # a leader gone with what it had not read yet
        await master.publish(T.leader, Leader(master_id="m3", epoch=3), retain=True)
        await eventually(lambda: slow.queue.qsize() == 0 and slow.read["s003"] >= 3)
        asked = fleet.registrations.sent
        await eventually(lambda: fleet.registrations.sent >= asked + 10, timeout=10)
        slow.answering = True  # (the next leader answers the retries)
        await eventually(lambda: registered(fleet) == 10, timeout=30)


async def test_the_attempts_due_in_one_tick_go_together() -> None:
    """One look sends every attempt due by then, in the slaves' order of wanting."""
    sent: list[int] = []

    class Fake:
        def __init__(self, n: int) -> None:
            self.n = n
            self.registered, self.ended = asyncio.Event(), asyncio.Event()

        async def announce(self) -> None:
            sent.append(self.n)

    pacer = Registrations(0.0, lambda: True)
    fakes = [Fake(n) for n in range(100)]
    for fake in fakes:
        pacer.wanted(fake)
    assert len(pacer.pending) == 100
    await pacer.send_due(time.monotonic() + 0.01)  # (every first attempt is due)
    assert sorted(sent) == list(range(100))
    for fake in fakes:
        fake.registered.set()
        pacer.answered(fake)
    assert not pacer.pending
