"""Attack 95: a tenant's executor fed the slave megabytes of garbage, a core's worth.

Each frame on an executor's line that is no message is refused, and an executor refused
past a burst of 1,000 is stopped (review 79). But a refusal counted one whatever its
size: frames of 4 MiB each, a thousand of them before the stop, kept the slave busy
reading and decoding (8 CPU-seconds in 10). Now a frame that is no message counts a
refusal for each 64 KiB of it: 100 frames of 1 MiB stop the executor, where 100
one-byte frames do not.

A real slave as root with task users and PID namespaces (harness.shared_slave), in this
process: its log lines are captured here."""

from __future__ import annotations

import shlex

import pytest
import structlog

from protocol.wire.messages import CommandInfo, ExecutorInfo

from harness.shared_slave import MALLORY, shared_slave

pytestmark = pytest.mark.timeout(90)

# 100 frames of 1 MiB, none a message (0xc1 is no msgpack type), then it waits
GARBAGE = """
import os, signal
frame = (1 << 20).to_bytes(4, "big") + b"\\xc1" * (1 << 20)
fd = int(os.environ["DRFMESOS_EXECUTOR_FD"])
for _ in range(100):
    os.write(fd, frame)
while True:
    signal.pause()
"""


async def test_an_executor_that_sends_megabytes_of_garbage_is_stopped() -> None:
    command = shlex.join(["/usr/bin/python3", "-I", "-c", GARBAGE])
    noisy = ExecutorInfo(executor_id="noisy", command=CommandInfo(value=f"exec {command}"))
    with structlog.testing.capture_logs() as lines:
        async with shared_slave() as s:
            await s.master.run("mallory", MALLORY, "m1", "", executor=noisy)
            # (not its registration timeout, 60 s: stopped for what it sent)
            await s.master.ends(MALLORY, "m1", timeout=45)
    stopped = [line for line in lines if line.get("event") == "executor.stopped"]
    assert stopped, "its 100 MiB of garbage did not stop it"
    assert "messages refused" in stopped[0]["why"]
