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

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from benchmarks.mesos_client import MesosScheduler
from protocol.wire.messages import RunTasks

from harness.mesos import StreamRig, framework_info, stream_rig

pytestmark = pytest.mark.timeout(60)
STREAMS = 3
MESSAGES = 5  # a stream's: 5 x 5.6 MB of base64, under its 32 MiB
DATA = 4 * 1024 * 1024  # what one executor frame carries, about (slave: MAX_FRAME)
HELD_BOUND = 32 * 1024 * 1024  # what the broker holds for a client that does not read


def launched_by(framework_id: str) -> Callable[[RunTasks], bool]:
    return lambda m: m.framework_id == framework_id


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[StreamRig]:
    async with stream_rig(tmp_path) as r:
        yield r


async def test_one_principals_streams_together_hold_no_more_than_one_client(rig: StreamRig) -> None:
    schedulers = [MesosScheduler(rig.master.web_ui, rig.auth) for _ in range(STREAMS)]
    try:
        for i, s in enumerate(schedulers):
            assert await s.subscribe({**framework_info("team-a"), "name": f"fw{i}"}) == 200
            await rig.launch_with_executor(s, f"t{i}")
            await rig.slave.inbox.wait_for(RunTasks, launched_by(s.framework_id))
        # from here on no framework reads; each one's executor talks, under its bound
        for s in schedulers:
            await rig.executor_says(s.framework_id, b"x" * DATA, MESSAGES)
        await rig.answered(STREAMS * MESSAGES)
        streams = [rig.stream(s.framework_id) for s in schedulers]
        kept = sum(st.holding for st in streams if st is not None)
        open_ = sum(st is not None for st in streams)
        assert kept <= HELD_BOUND, (
            f"team-a's {open_} open streams, none read, hold {kept / 1e6:.0f} MB in the "
            f"master's memory (with 64 streams, the most a principal may open: "
            f"{64 * kept / max(open_, 1) / 1e9:.1f} GB)"
        )
    finally:
        for s in schedulers:
            await s.close()
