"""Review 63 (on 2060393): a Mesos HTTP framework's event stream holds what its reader has
not read by count (`STREAM_EVENTS`, 10,000 events), not by size, and the tenant chooses
the size: its own executor's messages (`FrameworkMessage`, up to the executor line's
4 MiB frame) reach the master through the slave, which forwards whatever its executor
says (slave.executor_side), unlimited (slaves are never rate limited), and the master
hands each to the framework's stream as a MESSAGE event (its data base64: 5.6 MB).

A tenant subscribes over HTTP, launches one task with its executor, and stops reading its
stream; its executor sends 16 messages of 4 MiB. The master holds them all, some 90 MB,
in the stream's queue, and would hold 10,000 (56 GB) before it lets the stream go: one
tenant runs the master out of memory, and every tenant with it. (The broker, for a
framework on the bus, holds at most 32 MiB for a client that does not read:
protocol.tooling.brokers.QueueBounds.)

Here the slave's forwarding is played by the slave principal's own connection, sending
what slave.executor_side sends for an executor's FrameworkMessage. In process, on the
memory transport, with the Mesos HTTP API over a real socket."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.mesos_client import MesosScheduler, basic
from cluster.local.secure import provision
from master.http.config import HttpConfig
from master.master import Master, MasterConfig
from master.mesos_api.doors import mesos_doors
from master.mesos_api.scheduler_http import SchedulerApi, SchedulerStream
from protocol.transport.memory import MemoryBroker
from protocol.wire.messages import FrameworkMessage, RunTasks
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics

from harness.fakes import FakeSlave
from harness.helpers import eventually, open_transport
from harness.mesos import PRINCIPALS, framework_info, next_of

pytestmark = pytest.mark.timeout(60)
MESSAGES = 16
DATA = 4 * 1024 * 1024  # what one executor frame carries, about (slave: MAX_FRAME)
HELD_BOUND = 32 * 1024 * 1024  # what the broker holds for a client that does not read


class Rig:
    def __init__(self, master: Master, slave: FakeSlave, auth: str) -> None:
        self.master, self.slave, self.auth = master, slave, auth

    def stream(self, framework_id: str) -> SchedulerStream | None:
        assert self.master.http is not None
        [api] = [d for d in self.master.http.doors if isinstance(d, SchedulerApi)]
        return api.streams.get(framework_id)


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    store = provision(tmp_path / "auth", PRINCIPALS)
    broker, topics = MemoryBroker(store.principals.values()), Topics("mesos")
    config = MasterConfig(
        allocation_interval=0.1,
        principals=store.principals_file,
        http=HttpConfig(port=0, credentials=store.path),
    )
    async with contextlib.AsyncExitStack() as stack:
        bus = await open_transport(stack, broker.connector("master"), "master")
        master = Master(bus, topics, config)
        master.http_doors.extend(mesos_doors(master))
        await master.start()
        stack.push_async_callback(master.stop)
        slave_bus = await open_transport(stack, broker.connector("slave-0"), "s0")
        slave = FakeSlave(slave_bus, topics, "s0", Resources(cpus=4, mem=1024))
        await slave.register()
        await eventually(lambda: "s0" in master.books.slaves and bool(master.web_ui))
        secret = store.secret_file("team-a").read_text().strip()
        yield Rig(master, slave, basic("team-a", secret))


def held(stream: SchedulerStream) -> int:
    """Bytes of the events the stream holds for its reader, as they would be written."""
    waiting: list[Any] = list(stream.queue._queue)  # type: ignore[attr-defined]
    return sum(len(json.dumps(e)) for e in waiting if e is not None)


async def test_a_stream_that_is_not_read_does_not_hold_the_tenants_megabytes(rig: Rig) -> None:
    s = MesosScheduler(rig.master.web_ui, rig.auth)
    try:
        assert await s.subscribe(framework_info("team-a")) == 200
        [offer] = (await next_of(s, "OFFERS"))["offers"]
        cpu = [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}}]
        task = {
            "name": "t",
            "task_id": {"value": "t1"},
            "agent_id": offer["agent_id"],
            "resources": cpu,
            "executor": {
                "executor_id": {"value": "e1"},
                "command": {"value": "my-executor"},
                "resources": cpu,
            },
        }
        launch = {"type": "LAUNCH", "launch": {"task_infos": [task]}}
        status, _ = await s.call("ACCEPT", {"offer_ids": [offer["id"]], "operations": [launch]})
        assert status == 202
        await rig.slave.inbox.wait_for(RunTasks)
        # from here on the framework reads nothing; its executor talks
        stream = rig.stream(s.framework_id)
        assert stream is not None
        data = b"x" * DATA
        for _ in range(MESSAGES):
            await rig.slave.bus.publish(
                rig.slave.to_master,
                FrameworkMessage(
                    framework_id=s.framework_id, slave_id="s0", executor_id="e1", data=data
                ),
            )
        # each handled, or refused once the stream that would not read was let go (and its
        # framework, of no failover timeout, with it)
        outcomes = rig.master.messages.outcomes

        def answered() -> int:
            return sum(n for (kind, *_), n in outcomes.items() if kind == "FrameworkMessage")

        await eventually(lambda: answered() >= MESSAGES, timeout=30)
        target = rig.master.offer_rounds.count + 3  # (a stream let go has gone by then)
        await eventually(lambda: rig.master.offer_rounds.count >= target)
        kept = held(stream) if rig.stream(s.framework_id) is stream else 0
        assert kept <= HELD_BOUND, (
            f"the framework read nothing while its executor sent {MESSAGES} messages of "
            f"{DATA >> 20} MiB: its stream holds {stream.queue.qsize()} events, "
            f"{kept / 1e6:.0f} MB, in the master's memory (10,000 such events, the most it "
            f"holds, would be {10_000 * kept / max(stream.queue.qsize(), 1) / 1e9:.0f} GB)"
        )
    finally:
        await s.close()
