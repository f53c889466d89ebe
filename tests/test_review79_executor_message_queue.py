"""Review 79: a tenant's framework messages to its own silent executor pile up in the
slave's memory without bound.

The master forwards a framework's Message to the slave that runs its executor (master.
calls.framework_calls: only where the framework has that executor). The slave hands it
to the executor (slave.executor_side.on_framework_message, slave.executors.
ExecutorProcess.send): queued in a list while the executor has not registered, written
to its socket without waiting for it to read once it has. mallory's executor is her own
program: `sleep 300` never registers (nothing makes it: the slave has no registration
timeout), and one that registers need never read. Her scheduler then sends it messages
of 1 MiB, which the master takes 1,000 a second (its rate limit) and forwards: each is
kept by the slave, the process that holds every tenant's tasks on the host. 256 of
them, a quarter of a second of her rate limit, grew the slave by some 256 MiB; a minute
of them is 60 GiB, and the slave (or the host's OOM killer, choosing among everyone's
processes) goes, and with it alice's tasks' supervision, status updates and kills.

docs/explanation/mesos-differences.md: a Message for an executor the framework does not
run there is refused by the master "so that a tenant's data does not queue on a slave
ahead of other tenants' launches and kills"; the other direction is budgeted ("an
executor's messages to its framework are budgeted: 100 a second and 4 MiB a second").
Nothing bounds what waits on the slave for an executor that does not take it. A tenant
relies on the slave beside her staying up whatever its other tenants send.

A real slave as root with task users and PID namespaces (harness.shared_slave), in this
process: its growth is this process's resident memory.
"""

from __future__ import annotations

import socket
from pathlib import Path

from protocol.transport.channel import Channel
from protocol.wire.messages import CommandInfo, ExecutorInfo, FrameworkMessage, Reason, TaskState
from protocol.wire.resources import Resources
from slave.executors import MAX_WAITING, ExecutorProcess

from harness.helpers import eventually
from harness.shared_slave import ALICE, MALLORY, T, shared_slave

MESSAGES = 256
MIB = 1 << 20
BOUND = 64 * MIB  # what the slave may keep for one executor (the budget's burst is 16 MiB)


def resident() -> int:
    """This process's resident memory, in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def test_messages_for_a_silent_executor_do_not_pile_up_in_the_slave() -> None:
    async with shared_slave() as s:
        silent = ExecutorInfo(
            executor_id="silent",
            command=CommandInfo(value="exec sleep 300"),
            resources=Resources(cpus=0.1, mem=32),
        )
        await s.master.run("mallory", MALLORY, "m1", "", executor=silent)
        # (its task says nothing until its executor does: the executor is started)
        await eventually(lambda: (MALLORY, "silent") in s.slave.custom.executors, timeout=20)
        before = resident()
        topic = T.slave("slave", s.master.slave_id)
        for i in range(MESSAGES):
            data = i.to_bytes(4, "big") * (MIB // 4)  # (each its own bytes, as from the wire)
            message = FrameworkMessage(
                framework_id=MALLORY, slave_id=s.master.slave_id, executor_id="silent", data=data
            )
            await s.master.bus.publish(topic, message)
        # alice's launch, behind them on the slave's topic: once it ran, they were taken
        await s.master.run("alice", ALICE, "a1", "true")
        await s.master.ends(ALICE, "a1")
        grown = resident() - before
    assert grown < BOUND, (
        f"the slave grew by {grown / MIB:.0f} MiB holding {MESSAGES} MiB of mallory's "
        "messages for her executor, which never took them"
    )


async def test_an_executor_that_never_registers_is_stopped_and_its_tasks_fail() -> None:
    """Mesos's --executor_registration_timeout: an executor that has not registered in
    time is killed, and its tasks fail with REASON_EXECUTOR_REGISTRATION_TIMEOUT (it
    holds its resources, and a framework waiting on it, until then)."""
    async with shared_slave(executor_registration_timeout=1.0) as s:
        silent = ExecutorInfo(
            executor_id="silent",
            command=CommandInfo(value="exec sleep 300"),
            resources=Resources(cpus=0.1, mem=32),
        )
        await s.master.run("mallory", MALLORY, "m1", "", executor=silent)
        status = await s.master.ends(MALLORY, "m1", timeout=20)
        assert status.state == TaskState.FAILED
        assert status.reason == Reason.EXECUTOR_REGISTRATION_TIMEOUT
        assert "did not register within 1 s" in status.message
        await eventually(lambda: (MALLORY, "silent") not in s.slave.custom.executors)


async def test_messages_for_an_executor_that_does_not_read_stop_at_the_bound() -> None:
    """A registered executor that never reads its line: what waits for it, written and
    unread, stops at MAX_WAITING (the socket's own buffer beside it); the rest are
    dropped, each said to be, not kept."""
    ours, theirs = socket.socketpair()
    executor = ExecutorProcess(
        MALLORY,
        ExecutorInfo(executor_id="deaf", command=CommandInfo(value="true")),
        Path("/nonexistent"),
        {},
        on_message=nothing,
        on_bad_message=nothing,
        on_exit=nothing,
    )
    executor._channel = await Channel.open(ours)
    executor.registered = True
    try:
        data = b"x" * MIB
        message = FrameworkMessage(
            framework_id=MALLORY, slave_id="s", executor_id="deaf", data=data
        )
        said = [executor.send_framework_message(message) for _ in range(64)]
        taken = said.count(None)
        assert taken <= MAX_WAITING // MIB + 1
        assert executor._channel.buffered() <= MAX_WAITING + 2 * MIB
        assert all(why and "does not read" in why for why in said[taken:]), said
    finally:
        theirs.close()  # (first: what is unread is dropped, and the close need not wait)
        await executor._channel.close()


async def nothing(*_: object) -> None:
    return None
