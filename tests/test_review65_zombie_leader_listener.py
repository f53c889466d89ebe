"""Review 65 (on 58f0bdb): a listener whose main thread has exited is nobody's.

The ports isolator reads each process from /proc/PID/stat and drops one whose state is
`Z` (`_process`: "gone, or a zombie"), and reads its sockets from /proc/PID/fd. A
process whose main thread calls pthread_exit while another thread lives on is shown as
`Z` at /proc/PID (its leader is a zombie), and /proc/PID/fd is empty (the leader has no
file table); its other thread accepts on its socket all the same. So the process is in
no pass: neither a task's (its group, its PID namespace) nor a stray's.

On review 63's slave (`--switch-user`, `--no-pid-namespace`, ports held, a pass every
0.2 s), mallory's task is given port B+1 and listens on B+5, which the master will give
the next tenant, through such a process (five lines of Python: a thread accepting, then
`ctypes.CDLL(None).pthread_exit(None)`); it runs on. After 25 passes (5 s) the task is
still RUNNING, nothing is killed, and B+5 answers 'mallory' to alice's clients; alice's
server there cannot bind (EADDRINUSE).

Expected: a task that listens on a port of the slave's range it was not given is killed
(TASK_FAILED, CONTAINER_LIMITATION) and its listener with it, however its threads stand:
look at a process's threads (/proc/PID/task/TID/stat and fd) where its leader is a
zombie with live threads, not drop it.

A real slave (as root, tasks as their principal's user) on mosquitto, review 63's rig."""

from __future__ import annotations

import base64
import contextlib
import os
import signal
from pathlib import Path

import pytest

from protocol.wire.discrete import Discrete, Ranges
from protocol.wire.messages import Reason, TaskState
from protocol.wire.resources import PORTS

from harness.helpers import eventually
from harness.ports import reply, slave_with_range
from harness.ports import rig as rig
from harness.slave import Rig

pytestmark = pytest.mark.timeout(60)

# a thread that answers 'mallory' on argv[1]; the main thread exits (the process lives)
LEADERLESS = """
import ctypes, os, socket, sys, threading, time
def serve():
    # listens only once its process's main thread is gone: a ports pass sees the listener
    # with its leader a zombie from the first (before: under load, a pass could kill it
    # in the moment between its listen and its main thread's exit)
    while open(f'/proc/{os.getpid()}/stat').read().rsplit(')', 1)[1].split()[0] != 'Z':
        time.sleep(0.01)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(('127.0.0.1', int(sys.argv[1])))
    s.listen(16)
    open('squatter.pid', 'w').write(f'{os.getpid()} {os.getuid()}')
    while True:
        c, _ = s.accept()
        c.sendall(b'HTTP/1.0 200 OK\\r\\nContent-Length: 7\\r\\n\\r\\nmallory')
        c.close()
threading.Thread(target=serve).start()
ctypes.CDLL(None).pthread_exit(None)
"""


def leaderless(port: int) -> str:
    code = base64.b64encode(LEADERLESS.encode()).decode()
    return f"/usr/bin/python3 -c \"import base64; exec(base64.b64decode('{code}'))\" {port}"


def squatter(sandbox: Path) -> tuple[int, int] | None:
    """The listener's pid and real uid, once it listens (its main thread gone by then)."""
    try:
        pid, uid = (sandbox / "squatter.pid").read_text().split()
        return int(pid), int(uid)
    except (OSError, ValueError):
        return None


def leader_state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2 :].split()[0]


async def test_a_task_listening_through_a_process_whose_main_thread_exited_is_killed(
    rig: Rig,
) -> None:
    base, _ = await slave_with_range(rig)
    mallory = await rig.framework("mallory")
    # given B+1; listens on B+5 (not given), through a thread of a process whose main
    # thread exited first
    command = f"{leaderless(base + 5)} & sleep 600"
    sandbox = await rig.launch(
        mallory, command, "squat", discrete=Discrete({PORTS: Ranges([(base + 1, base + 1)])})
    )
    pid = None
    try:
        await mallory.update_for("squat", TaskState.RUNNING, timeout=20)
        await eventually(lambda: squatter(sandbox) is not None, timeout=20)
        pid, uid = squatter(sandbox) or (0, 0)
        assert uid not in (0, os.geteuid())  # (mallory's user's)
        try:
            status = await mallory.update_for("squat", TaskState.FAILED, timeout=10)
        except (TimeoutError, AssertionError):
            raise AssertionError(
                f"mallory's task, given port {base + 1}, listens on {base + 5} through a "
                f"process whose main thread exited (/proc/{pid}/stat says "
                f"{leader_state(pid)}, its fd/ is empty): it runs on, and {base + 5} "
                f"answers {reply(base + 5)!r}"
            ) from None
        assert status.reason == Reason.CONTAINER_LIMITATION
        assert reply(base + 5) is None
    finally:
        if pid is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
