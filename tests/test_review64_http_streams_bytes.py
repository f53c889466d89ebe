"""Review 64 (on 9ab39f0): a Mesos HTTP event stream is bounded in bytes, 32 MiB, as the
broker bounds a client that does not read; but the bound is a stream's, and one principal
may hold 64 streams open (STREAMS_PER_PRINCIPAL), each kept just under it.

A stream is let go only past STREAM_BYTES. A tenant whose frameworks stop reading, and
whose executors send each framework a little less than the bound (here 5 messages of
4 MiB: 28 MB as MESSAGE events), keeps every stream open and its bytes in the master's
memory, for as long as it likes: seen here, 3 streams held 63 MB (the rest of the 84 MB
sent sat in the socket's buffers); with 64 (the most a principal may open) 1.3 GB, all one
tenant's, and the master out of memory for everyone. (What a stream has taken off its
queue and not yet written, waiting on a reader that does not read, is in the transport's
buffer: it is counted too, as it is held.)

Expected: what one principal's streams hold together is bounded as one client's is on
the broker (32 MiB), or a principal's streams are let go past it.

In process, on the memory transport, with the Mesos HTTP API over a real socket (review
63's rig: the slave's forwarding of its executors' messages is played by the slave
principal's connection)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

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
STREAMS = 3
MESSAGES = 5  # a stream's: 5 x 5.6 MB of base64, under its 32 MiB
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
    """Bytes the master holds for the stream's reader: in its queue, and written to its
    transport but not yet sent."""
    buffered = stream.transport.get_write_buffer_size() if stream.transport else 0
    return stream.held + buffered


async def launch_with_executor(rig: Rig, s: MesosScheduler, i: int) -> None:
    [offer] = (await next_of(s, "OFFERS"))["offers"][:1]
    cpu = [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}}]
    task = {
        "name": "t",
        "task_id": {"value": f"t{i}"},
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


def launched_by(framework_id: str) -> Callable[[RunTasks], bool]:
    return lambda m: m.framework_id == framework_id


async def test_one_principals_streams_together_hold_no_more_than_one_client(rig: Rig) -> None:
    schedulers = [MesosScheduler(rig.master.web_ui, rig.auth) for _ in range(STREAMS)]
    try:
        for i, s in enumerate(schedulers):
            assert await s.subscribe({**framework_info("team-a"), "name": f"fw{i}"}) == 200
            await launch_with_executor(rig, s, i)
            await rig.slave.inbox.wait_for(RunTasks, launched_by(s.framework_id))
        # from here on no framework reads; each one's executor talks, under its bound
        data = b"x" * DATA
        for s in schedulers:
            for _ in range(MESSAGES):
                await rig.slave.bus.publish(
                    rig.slave.to_master,
                    FrameworkMessage(
                        framework_id=s.framework_id, slave_id="s0", executor_id="e1", data=data
                    ),
                )
        outcomes = rig.master.messages.outcomes

        def answered() -> int:
            return sum(n for (kind, *_), n in outcomes.items() if kind == "FrameworkMessage")

        await eventually(lambda: answered() >= STREAMS * MESSAGES, timeout=30)
        target = rig.master.offer_rounds.count + 3  # (a stream let go has gone by then)
        await eventually(lambda: rig.master.offer_rounds.count >= target)
        streams = [rig.stream(s.framework_id) for s in schedulers]
        kept = sum(held(st) for st in streams if st is not None)
        open_ = sum(st is not None for st in streams)
        assert kept <= HELD_BOUND, (
            f"team-a's {open_} open streams, none read, hold {kept / 1e6:.0f} MB in the "
            f"master's memory (with 64 streams, the most a principal may open: "
            f"{64 * kept / max(open_, 1) / 1e9:.1f} GB)"
        )
    finally:
        for s in schedulers:
            await s.close()
