"""Review 79: a tenant's executor writes the slave's log, a warning line for every five
bytes it sends.

A custom executor speaks to its slave over its private line (slave.executors), framed
by a 4-byte length. Each frame that is no message (slave.executor_side.
_bad_from_executor), each message of a type the slave does not take, each update for a
task not on the executor, is refused with a warning in the slave's log
(`executor.refused`) and an Error written back on the line: every one, no sampling, no
budget. mallory's executor is her own program: one write of 50,000 frames of one byte
(250 KB) makes the slave log 50,000 warnings (50,000 JSON lines of the slave's log, which is
every tenant's: under systemd, journald's rate limit then drops the slave's other lines,
alice's tasks' ends and kills among them) and queue 50,000 Errors for an executor that
reads none.

docs/reference/bounds.md: the master "logs a few refusals a second per principal with how
many it left out by code (`unlogged_by_code`)"; review 72 held the master to it. The
slave's refusals of a tenant's executor cost the same shared log and are not bounded; the
executor's messages to its framework are (100 a second). A tenant relies on the slave's
log, which says what happened to her tasks, not drowning in another tenant's noise.

A real slave as root with task users and PID namespaces (harness.shared_slave), in this
process: its log lines are captured here.
"""

from __future__ import annotations

import shlex

import structlog

from protocol.wire.messages import CommandInfo, ExecutorInfo

from harness.shared_slave import MALLORY, shared_slave

FRAMES = 50_000
MOST = 1_000  # refusals logged for one executor's burst (the master: a few a second)

# the frames, then a header past the frame bound: the slave reads them all in order, then
# stops the executor (its line broken), which tells the test that all were read
NOISE = f"""
import os, signal
os.write(int(os.environ["DRFMESOS_EXECUTOR_FD"]), b"\\0\\0\\0\\1x" * {FRAMES} + b"\\xff" * 4)
while True:
    signal.pause()
"""


async def test_an_executors_bad_frames_do_not_flood_the_slaves_log() -> None:
    command = shlex.join(["/usr/bin/python3", "-I", "-c", NOISE])
    noisy = ExecutorInfo(executor_id="noisy", command=CommandInfo(value=f"exec {command}"))
    with structlog.testing.capture_logs() as lines:
        async with shared_slave() as s:
            await s.master.run("mallory", MALLORY, "m1", "", executor=noisy)
            # all its frames read once its line broke on the last: it is stopped, and its
            # task ends with it
            await s.master.ends(MALLORY, "m1", timeout=60)
    refused = [
        line
        for line in lines
        if line.get("event") == "executor.refused" and line.get("executor_id") == "noisy"
    ]
    assert len(refused) <= MOST, (
        f"{FRAMES} frames of mallory's executor ({FRAMES * 5} bytes) made {len(refused)} "
        "warnings in the slave's log"
    )
