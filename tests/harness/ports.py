"""The ports isolator's rigs: ports given to a task, whether a port answers, and the pid
a task wrote of the stray it started."""

from __future__ import annotations

import contextlib
import os
import signal
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from protocol.tooling.brokers import MosquittoBroker
from protocol.tooling.ports import free_port
from protocol.wire.discrete import Discrete, Ranges
from protocol.wire.messages import CommandInfo, TaskInfo
from protocol.wire.resources import PORTS, Resources
from slave.slave import Slave

from harness.slave import Rig, master_rig


@pytest.fixture
async def rig(mosquitto: MosquittoBroker, tmp_path: Path) -> AsyncIterator[Rig]:
    """A master and its slave rig, as root: tasks switch to their principal's user."""
    if os.geteuid() != 0:
        pytest.skip("switching users needs root")
    async with master_rig(mosquitto, tmp_path) as r:
        yield r


async def slave_with_range(rig: Rig) -> tuple[int, Slave]:
    """Slave s1 (4 CPUs, 2 GB) with ports B..B+9 of a free block, its ports isolated and
    checked every 0.2 s, tasks as their users in the host's PID namespace: B, and it."""
    base = free_port(12)
    slave = await rig.start_slave(
        "s1", Resources(cpus=4, mem=2048), discrete=Discrete({PORTS: Ranges([(base, base + 9)])}),
        ports_isolation=True, ports_check_interval=0.2, switch_user=True, pid_namespace=False,
    )  # fmt: skip
    return base, slave


def ports(*given: int) -> Discrete:
    return Discrete({PORTS: Ranges([(p, p) for p in given])})


def command(task_id: str, value: str, given: Discrete, slave_id: str) -> TaskInfo:
    """A command task of 0.1 cpus and 64 MB given the ports `given`."""
    return TaskInfo(
        task_id=task_id,
        slave_id=slave_id,
        resources=Resources(cpus=0.1, mem=64),
        command=CommandInfo(value=value),
        discrete=given,
    )


def reply(port: int) -> str | None:
    """What the server on `port` of 127.0.0.1 answers a GET with (None: nobody)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as answer:
            return str(answer.read().decode())
    except OSError:
        return None


def answers(port: int) -> bool:
    return reply(port) is not None


def stray_pid(sandbox: Path, name: str = "stray.pid") -> int | None:
    """The pid a task wrote to `name` in its sandbox, once it has."""
    try:
        return int((sandbox / name).read_text().strip())
    except (OSError, ValueError):
        return None


def alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def kill(pid: int | None) -> None:
    if pid is not None:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
