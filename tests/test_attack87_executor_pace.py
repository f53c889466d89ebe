"""attack87: an executor's status updates are paced per principal on a slave
(slave.message_budget.UpdatePace), but its token checks (`CheckExecutorToken`) are not:
each is read, checked and answered as fast as the executor writes them, on the slave's
one loop, which every tenant's tasks share. A tenant whose executor asks token checks
without end takes the slave's time as a flood of RUNNING updates did before the pace:
measured here, another tenant's `true` task took 2.0 s from launch to its end (2.6 s at
most) while mallory's executor asked, against 80 ms before it began.

Run as a real root slave with tenants (harness.shared_slave): mallory's executor is a
few lines of system Python that writes prepared frames on `DRFMESOS_EXECUTOR_FD` and
reads the answers."""

from __future__ import annotations

import struct

import pytest

import slave.executor_side
from protocol.transport.aio import loop_time
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

from harness.helpers import eventually
from harness.shared_slave import ALICE, MALLORY, Shared, shared_slave

EXECUTOR = "checker"
CHECKS = 1000
RATE, BURST = 200.0, 100.0
DONE = b"checks-done"


def frame(message: Wire) -> bytes:
    data = encode(message)
    return struct.pack(">I", len(data)) + data


def checks_program(s: Shared) -> str:
    """mallory's executor: registers with its own token, asks CHECKS checks of it (reading
    the answers as they come, so that none is held back by a full line), then tells its
    framework DONE: the slave reads its line in order, so all were handled before it."""
    tokens = s.slave.custom.tokens
    assert tokens is not None
    token = tokens.issue(MALLORY, EXECUTOR)
    sid = s.slave.slave_id
    register = frame(
        RegisterExecutor(slave_id=sid, framework_id=MALLORY, executor_id=EXECUTOR, token=token)
    )
    check = frame(CheckExecutorToken(request_id="r1", token=token))
    done = frame(
        FrameworkMessage(framework_id=MALLORY, slave_id=sid, executor_id=EXECUTOR, data=DONE)
    )
    return (
        "import os, socket, threading, time\n"
        "s = socket.socket(fileno=int(os.environ['DRFMESOS_EXECUTOR_FD']))\n"
        "def drain():\n"
        "    while s.recv(1 << 16):\n"
        "        pass\n"
        "threading.Thread(target=drain, daemon=True).start()\n"
        f"s.sendall(bytes.fromhex('{register.hex()}'))\n"
        f"s.sendall(bytes.fromhex('{check.hex()}') * {CHECKS})\n"
        f"s.sendall(bytes.fromhex('{done.hex()}'))\n"
        "time.sleep(600)\n"
    )


async def test_an_executors_token_checks_are_paced_with_its_principals_updates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(slave.executor_side, "UPDATES_A_SECOND", RATE)
    monkeypatch.setattr(slave.executor_side, "UPDATES_AT_ONCE", BURST)
    async with shared_slave() as s:
        program = s.work.parent / "checker.py"
        program.write_text(checks_program(s))
        program.chmod(0o644)
        checker = ExecutorInfo(
            executor_id=EXECUTOR,
            command=CommandInfo(value=f"exec /usr/bin/python3 {program}"),
            resources=Resources(cpus=0.1, mem=64),
        )
        began = loop_time()
        await s.master.run("mallory", MALLORY, "m1", "", executor=checker)
        # another tenant's task runs to its end meanwhile
        await s.master.run("alice", ALICE, "a1", "true")
        await s.master.ends(ALICE, "a1")
        await eventually(lambda: any(m.data == DONE for m in s.master.messages), timeout=60)
        took = loop_time() - began
    # past its principal's burst, its checks came at the pace (a floor: a slow machine
    # only adds to it); unpaced, the slave answered all 600 in a few milliseconds
    assert took >= (CHECKS - BURST) / RATE * 0.9, f"{CHECKS} checks answered in {took:.2f} s"
