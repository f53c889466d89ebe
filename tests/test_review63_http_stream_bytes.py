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

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from benchmarks.mesos_client import MesosScheduler
from protocol.wire.messages import RunTasks

from harness.mesos import StreamRig, framework_info, stream_rig

pytestmark = pytest.mark.timeout(60)
MESSAGES = 16
DATA = 4 * 1024 * 1024  # what one executor frame carries, about (slave: MAX_FRAME)
HELD_BOUND = 32 * 1024 * 1024  # what the broker holds for a client that does not read


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[StreamRig]:
    async with stream_rig(tmp_path) as r:
        yield r


async def test_a_stream_that_is_not_read_does_not_hold_the_tenants_megabytes(
    rig: StreamRig,
) -> None:
    s = MesosScheduler(rig.master.web_ui, rig.auth)
    try:
        assert await s.subscribe(framework_info("team-a")) == 200
        await rig.launch_with_executor(s, "t1")
        await rig.slave.inbox.wait_for(RunTasks)
        # from here on the framework reads nothing; its executor talks
        stream = rig.stream(s.framework_id)
        assert stream is not None
        await rig.executor_says(s.framework_id, b"x" * DATA, MESSAGES)
        # each handled, or refused once the stream that would not read was let go (and its
        # framework, of no failover timeout, with it)
        await rig.answered(MESSAGES)
        kept = stream.holding if rig.stream(s.framework_id) is stream else 0
        assert kept <= HELD_BOUND, (
            f"the framework read nothing while its executor sent {MESSAGES} messages of "
            f"{DATA >> 20} MiB: its stream holds {stream.queue.qsize()} events, "
            f"{kept / 1e6:.0f} MB, in the master's memory (10,000 such events, the most it "
            f"holds, would be {10_000 * kept / max(stream.queue.qsize(), 1) / 1e9:.0f} GB)"
        )
    finally:
        await s.close()
