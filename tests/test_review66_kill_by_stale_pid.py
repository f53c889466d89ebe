"""Review 66 (on c3c4717): the ports isolator kills a squatting task's listeners by the
pids it read at the look, after the task's kill has freed them.

`enforce_ports` finds a task whose group listens on a port of the slave's range it was
not given, awaits `runner.kill(0.0, limit)` (SIGKILL to the group, then waits for the
task to end), and only then calls `kill_listeners(ports, bad)`: a bare `os.kill(pid,
SIGKILL)` of each pid seen listening at the look. By then those listeners are dead and
reaped (they were the task's group), their pids are free, and any process of any
tenant that got one in between is SIGKILLed in their place. Mallory's task can spread
its listening socket over many processes (each forked one holds it) to free many pids
at once, and spin forks to bring the pid counter round to them.

The rig: a real listener on port B+5 (not given; the task is given B+1) as the task's
process group; the runner's kill ends it and, before returning, the next pid the
kernel gives (ns_last_pid, as root: standing in for mallory's spin of forks) goes to
an unrelated `sleep`, alice's. After the pass the sleep is dead: SIGKILLed by the
isolator, which meant the listener.

Expected: a process is killed only if it is still the one seen listening (a pidfd
opened at the look, or its start time checked just before the kill), or the listeners
are killed before the task's kill frees their pids."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from protocol.tooling.ports import free_port
from protocol.wire.discrete import Discrete, Ranges
from protocol.wire.messages import TaskState
from protocol.wire.resources import PORTS, Resources
from protocol.wire.values import TaskInfo
from slave.config import TaskRecord
from slave.ports_isolator import enforce_ports
from slave.runners import Limit

from harness.helpers import eventually

pytestmark = pytest.mark.timeout(60)

LISTEN = (
    "import socket, sys, time\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(4)\n"
    "open(sys.argv[2], 'w').write('up')\n"
    "time.sleep(600)\n"
)


def spawn_at(pid: int) -> subprocess.Popen[bytes] | None:
    """A `sleep` given `pid` (the kernel's next pid set just below it), or None."""
    for _ in range(20):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        victim = subprocess.Popen(["sleep", "600"])
        if victim.pid == pid:
            return victim
        victim.kill()
        victim.wait()
    return None


class Listener:
    """The squatting task's runner: its group is the listener; its kill ends it, and
    its pid goes to alice's process before the kill returns."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.pid: int | None = proc.pid
        self.outside_group = None
        self.victim: subprocess.Popen[bytes] | None = None
        self.killed = asyncio.Event()

    async def kill(self, grace: float, limit: Limit | None = None) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        await asyncio.to_thread(self.proc.wait)  # (the task ended: its pid is free)
        self.victim = spawn_at(self.proc.pid)
        self.killed.set()


class Counted(dict[tuple[str, str], TaskRecord]):
    """The slave's tasks, counting the passes that read them."""

    passes = 0

    def values(self) -> Any:
        Counted.passes += 1
        return super().values()


class Log:
    def warning(self, *args: Any, **kwargs: Any) -> None:
        pass


@pytest.fixture
def cleanup() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        with contextlib.suppress(OSError):
            p.kill()
        with contextlib.suppress(Exception):
            p.wait(5)


async def test_the_listeners_kill_does_not_hit_a_process_that_took_a_freed_pid(
    tmp_path: Any, cleanup: list[subprocess.Popen[bytes]]
) -> None:
    if os.geteuid() != 0:
        pytest.skip("setting the next pid needs root")
    base = free_port(10)
    up = tmp_path / "up"
    proc = subprocess.Popen(  # noqa: ASYNC220 (its pid is the rig's)
        ["/usr/bin/python3", "-c", LISTEN, str(base + 5), str(up)], start_new_session=True
    )
    cleanup.append(proc)
    await eventually(up.exists, timeout=10)
    runner = Listener(proc)
    info = TaskInfo(
        task_id="squat",
        slave_id="s",
        resources=Resources(cpus=1),
        discrete=Discrete({PORTS: Ranges([(base + 1, base + 1)])}),
        command={"value": "true"},
    )
    record = TaskRecord("mallory-fw", info, TaskState.RUNNING, runner=runner)  # type: ignore[arg-type]
    tasks = Counted({("mallory-fw", "squat"): record})
    slave = Discrete({PORTS: Ranges([(base, base + 9)])})
    Counted.passes = 0
    watch = asyncio.create_task(enforce_ports(tasks, slave, 0.05, Log()))
    try:
        await eventually(runner.killed.is_set, timeout=20)
        record.state = TaskState.FAILED  # (the runner's report: it ended)
        passes = Counted.passes
        await eventually(lambda: Counted.passes > passes, timeout=10)  # (the pass is over)
    finally:
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
    victim = runner.victim
    if victim is None:
        pytest.skip("the freed pid went elsewhere 20 times (a busy machine)")
    cleanup.append(victim)
    code = victim.poll()
    assert code is None, (
        f"the squatting task's listener on port {base + 5} (pid {proc.pid}) was killed "
        f"with its task; alice's sleep then got pid {victim.pid}, and the isolator's "
        f"kill of the listeners, by the pid it read at the look, SIGKILLed it (exit {code})"
    )
