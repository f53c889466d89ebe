"""Review 66 (on c3c4717): a listener held in a thread's own file table is unseen.

The ports isolator reads a process's sockets from /proc/PID/fd, the table of its main
thread, and looks at another thread's (/proc/PID/task/TID/fd) only where the main
thread's reads empty (a leader that exited). But threads need not share one file
table: a thread that calls `unshare(CLONE_FILES)` gets a table of its own, and a socket
it then opens is in no other thread's. Its main thread alive, with its stdin, stdout
and stderr, /proc/PID/fd shows no socket at all.

The rig: a process of its own group (a task's, as the isolator is asked of it) whose
second thread unshares its file table, then listens on port B+5 and answers 'mallory';
its main thread sleeps. B+5 answers 'mallory', and the isolator's look
(`listened_ports({pid})`, what every pass asks) says the task listens on nothing: a
task given B+1 squats B+5 (the next tenant's, when the master gives it) pass after pass.

Expected: a process's sockets are read from each of its threads' tables
(/proc/PID/task/*/fd), or its threads' where they differ from its leader's."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.tooling.ports import free_port
from slave.ports_isolator import listened_ports

from harness.helpers import eventually
from harness.ports import reply

pytestmark = pytest.mark.timeout(60)

# a thread with a file table of its own answers 'mallory' on argv[1]; the main one sleeps
PRIVATE_TABLE = """
import ctypes, os, socket, sys, threading, time
CLONE_FILES = 0x400
def serve():
    assert ctypes.CDLL(None, use_errno=True).unshare(CLONE_FILES) == 0
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(('127.0.0.1', int(sys.argv[1])))
    s.listen(16)
    open(sys.argv[2], 'w').write('up')
    while True:
        c, _ = s.accept()
        c.sendall(b'HTTP/1.0 200 OK\\r\\nContent-Length: 7\\r\\n\\r\\nmallory')
        c.close()
threading.Thread(target=serve, daemon=True).start()
time.sleep(600)
"""


@pytest.fixture
def squatter(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    port = free_port(10) + 5
    up = tmp_path / "up"
    proc = subprocess.Popen(
        ["/usr/bin/python3", "-c", PRIVATE_TABLE, str(port), str(up)], start_new_session=True
    )
    try:
        yield proc, port, up
    finally:
        with contextlib.suppress(OSError):
            proc.kill()
        proc.wait(5)


async def test_a_socket_in_a_threads_own_file_table_is_seen(
    squatter: tuple[subprocess.Popen[bytes], int, Path],
) -> None:
    proc, port, up = squatter
    await eventually(up.exists, timeout=10)
    assert reply(port) == "mallory"
    own = {
        fd: os.readlink(f"/proc/{proc.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{proc.pid}/fd")
    }
    assert own  # (its main thread's table is not empty: no thread is read instead)
    looked = await asyncio.to_thread(listened_ports, {proc.pid})  # (as the slave asks)
    looked.close()
    listened = looked.ports
    assert port in listened.get(proc.pid, {}), (
        f"a task's process listens on port {port} (it answers {reply(port)!r}) from a thread "
        f"that unshared its file table; the isolator's look says it listens on "
        f"{sorted(listened.get(proc.pid, {}))}: its main thread's fds are {own}"
    )
