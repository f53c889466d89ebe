"""attack84: a tenant's custom executor asks its slave to check tokens
(`CheckExecutorToken`) as fast as it can and never reads the answers.

The slave answered each at once on the executor's line, outside every bound it keeps on
that line (framework messages stop at MAX_WAITING, 16 MiB written and unread; refusals
are sampled, and an executor refused too often is stopped; a token check is neither): the
answers piled up in the slave's memory, 45.6 MiB in 5 s, as much as the executor cared to
ask for. Its answers now stop at the same bound (`ExecutorProcess.answer`).

Run as a real root slave with tenants (harness.shared_slave): mallory's executor is a
few lines of system Python that write prepared frames on `DRFMESOS_EXECUTOR_FD`.
"""

from __future__ import annotations

import struct

import pytest

import slave.executor_side
from protocol.wire.codec import encode
from protocol.wire.messages import (
    CheckExecutorToken,
    CommandInfo,
    ExecutorInfo,
    FrameworkMessage,
    RegisterExecutor,
    Wire,
)
from protocol.wire.resources import Resources
from slave.executors import MAX_WAITING

from harness.helpers import eventually
from harness.shared_slave import MALLORY, Shared, shared_slave

EXECUTOR = "hog-" + "e" * 190  # (an id of 194 characters: the answers name it)
CHECKS = 100_000  # token checks asked, some 47 MiB of answers
DONE = b"flood-done"


def frame(message: Wire) -> bytes:
    data = encode(message)
    return struct.pack(">I", len(data)) + data


def flood_program(s: Shared) -> str:
    """mallory's executor: it registers with its own token, asks CHECKS checks of that
    token (each answered with its framework's and executor's ids), says DONE to its
    framework (the slave reads its line in order: all were handled before this), and then
    sleeps without reading a byte of what the slave wrote it."""
    tokens = s.slave.custom.tokens
    assert tokens is not None
    token = tokens.issue(MALLORY, EXECUTOR)  # (deterministic: the one its environment holds)
    register = frame(
        RegisterExecutor(
            slave_id=s.slave.slave_id, framework_id=MALLORY, executor_id=EXECUTOR, token=token
        )
    )
    check = frame(CheckExecutorToken(request_id="r" * 200, token=token))
    done = frame(
        FrameworkMessage(
            framework_id=MALLORY, slave_id=s.slave.slave_id, executor_id=EXECUTOR, data=DONE
        )
    )
    return (
        "import os, socket, time\n"
        "s = socket.socket(fileno=int(os.environ['DRFMESOS_EXECUTOR_FD']))\n"
        f"s.sendall(bytes.fromhex('{register.hex()}'))\n"
        f"batch = bytes.fromhex('{check.hex()}') * 1000\n"
        f"for _ in range({CHECKS // 1000}):\n"
        "    s.sendall(batch)\n"
        f"s.sendall(bytes.fromhex('{done.hex()}'))\n"
        "time.sleep(600)\n"
    )


async def test_an_executor_that_asks_token_checks_and_never_reads_holds_a_bounded_buffer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # (its checks as fast as the slave answers them: paced, 100,000 took 100 s; what is
    # measured here is what the slave holds of its answers)
    monkeypatch.setattr(slave.executor_side, "UPDATES_A_SECOND", 1e9)
    monkeypatch.setattr(slave.executor_side, "UPDATES_AT_ONCE", 1e9)
    async with shared_slave() as s:
        program = s.work.parent / "hog.py"
        program.write_text(flood_program(s))
        program.chmod(0o644)
        hog = ExecutorInfo(
            executor_id=EXECUTOR,
            command=CommandInfo(value=f"exec /usr/bin/python3 {program}"),
            resources=Resources(cpus=0.1, mem=64),
        )
        await s.master.run("mallory", MALLORY, "m1", "", executor=hog)
        key = (MALLORY, EXECUTOR)
        await eventually(lambda: key in s.slave.executors, timeout=30)
        most = 0

        def flood_over() -> bool:
            """The executor's DONE reached its framework, or the slave stopped it."""
            nonlocal most
            executor = s.slave.executors.get(key)
            channel = executor._channel if executor is not None else None
            if channel is not None:
                most = max(most, channel.buffered())
            gone = executor is None or executor.shutting_down
            return gone or any(m.data == DONE for m in s.master.messages)

        await eventually(flood_over, timeout=180)
        # what the slave keeps written and unread for one executor: its framework's
        # messages stop at MAX_WAITING; its answers to the executor's own asks do not
        assert most <= MAX_WAITING, f"{most / 2**20:.1f} MiB held for one executor"
