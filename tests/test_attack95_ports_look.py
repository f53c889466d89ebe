"""Attack 95: one tenant's task made the ports isolator's look last minutes.

The look read a process's descriptors once for each of its threads, though threads
share one table: a task of 2,000 threads and 19,950 descriptors cost a look 40 million
reads (84 s of the slave's CPU, a core), and until it ended nobody's squatting or port
hoarding was checked. Now each distinct table is read once (the kernel compares them,
kcmp; where it cannot, each thread's, one charged), and a tenant's reads a look are
bounded (MOST_DESCRIPTORS, a principal's tasks together): past them the rest of its
processes are not read, and are killed with the task failed, its listeners read too.

Real processes: a process of its own group (a task's, as the isolator is asked of it)
with many threads and many open descriptors, and one thread with a table of its own."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import slave.fd_tables as fd_tables
import slave.ports_isolator as ports_isolator
from protocol.tooling.ports import free_port
from protocol.wire.discrete import Discrete, Ranges
from protocol.wire.messages import Reason, TaskState
from protocol.wire.resources import PORTS, Resources
from slave.fd_tables import share_files
from slave.ports_isolator import listened_ports

from harness.helpers import eventually
from harness.ports import answers, ports
from harness.slave import Rig, port_server
from harness.slave import rig as rig

pytestmark = pytest.mark.timeout(60)

# argv: port, file to write when up, threads, descriptors. Many threads sharing the main
# table; one more with a table of its own listening on the port.
MANY = """
import ctypes, os, socket, sys, threading, time
port, up, threads, fds = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
held = [os.open('/dev/null', os.O_RDONLY) for _ in range(fds)]
ready = threading.Barrier(threads + 2)
def idle():
    ready.wait()
    time.sleep(600)
def own_table():
    assert ctypes.CDLL(None, use_errno=True).unshare(0x400) == 0  # CLONE_FILES
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(('127.0.0.1', port))
    s.listen(4)
    ready.wait()
    time.sleep(600)
for _ in range(threads):
    threading.Thread(target=idle, daemon=True).start()
threading.Thread(target=own_table, daemon=True).start()
ready.wait()
open(up, 'w').write('up')
time.sleep(600)
"""


@pytest.fixture
def many(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    port = free_port(10) + 5
    up = tmp_path / "up"
    proc = subprocess.Popen(
        ["/usr/bin/python3", "-c", MANY, str(port), str(up), "200", "2000"],
        start_new_session=True,
    )
    try:
        yield proc, port, up
    finally:
        with contextlib.suppress(OSError):
            proc.kill()
        proc.wait(5)


async def test_the_kernel_tells_the_thread_with_a_table_of_its_own_from_those_sharing_one(
    many: tuple[subprocess.Popen[bytes], int, Path],
) -> None:
    proc, _, up = many
    await eventually(up.exists, timeout=20)
    if share_files(proc.pid, proc.pid) is None:
        pytest.skip("this kernel cannot compare descriptor tables here (kcmp)")
    threads = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task")]
    apart = [t for t in threads if not share_files(proc.pid, t)]
    assert len(apart) == 1, f"{len(apart)} of {len(threads)} threads seen with a table of their own"


async def test_a_table_many_threads_share_is_read_once_and_a_threads_own_too(
    many: tuple[subprocess.Popen[bytes], int, Path],
) -> None:
    proc, port, up = many
    await eventually(up.exists, timeout=20)
    threads = len(os.listdir(f"/proc/{proc.pid}/task"))
    descriptors = len(os.listdir(f"/proc/{proc.pid}/fd"))
    assert threads > 200
    assert descriptors > 2000
    _, cost = ports_isolator._sockets(str(proc.pid), 10**9)
    if share_files(proc.pid, proc.pid) is not None:
        # two tables read (the shared one, the thread's own) and each thread compared
        # with them: not a read of the 2,000 descriptors a thread (400,000)
        assert cost < 2 * (descriptors + 2 * threads), (cost, threads, descriptors)
    looked = await asyncio.to_thread(listened_ports, {proc.pid})
    looked.close()
    assert port in looked.ports.get(proc.pid, {}), "the own table's listener is seen"
    assert not looked.unread


async def test_where_the_kernel_cannot_compare_every_threads_table_is_read_and_one_charged(
    many: tuple[subprocess.Popen[bytes], int, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """(Another architecture, no kcmp, a seccomp profile denying it.) A process of 200
    threads and 2,000 descriptors is one table's reads, not 200's: no task of many threads
    is failed for its threads; and the listener in the thread's own table is still seen."""
    proc, port, up = many
    await eventually(up.exists, timeout=20)
    monkeypatch.setattr(fd_tables, "share_files", lambda a, b: None)
    _, cost = ports_isolator._sockets(str(proc.pid), 10**9)
    assert cost < 2 * len(os.listdir(f"/proc/{proc.pid}/fd")) + 300
    looked = await asyncio.to_thread(listened_ports, {proc.pid})
    looked.close()
    assert port in looked.ports.get(proc.pid, {})
    assert not looked.unread


async def test_a_table_whose_thread_read_has_exited_is_read_through_another(
    many: tuple[subprocess.Popen[bytes], int, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread a table is read through exits before the read ends (it reads empty,
    or part): the table is read again through the next of its threads, not left."""
    proc, port, up = many
    await eventually(up.exists, timeout=20)
    real = fd_tables.distinct_tables

    def first_gone(threads: list[int], allowance: int) -> tuple[list[list[int]], int, bool]:
        tables, cost, told = real(threads, allowance)
        return [[2**22 + 1, *table] for table in tables], cost, told  # (no such thread)

    monkeypatch.setattr(ports_isolator, "distinct_tables", first_gone)
    looked = await asyncio.to_thread(listened_ports, {proc.pid})
    looked.close()
    assert port in looked.ports.get(proc.pid, {})


async def test_a_task_past_its_reads_is_not_read_on_and_its_process_held_to_be_killed(
    many: tuple[subprocess.Popen[bytes], int, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    proc, _, up = many
    await eventually(up.exists, timeout=20)
    monkeypatch.setattr(ports_isolator, "MOST_DESCRIPTORS", 500)
    looked = await asyncio.to_thread(listened_ports, {proc.pid})
    try:
        assert looked.unread == {proc.pid: {proc.pid}}
        assert proc.pid in looked.pidfds  # (a kill reaches it, or nothing: never a reused pid)
        ports_isolator.kill_pids(looked.unread[proc.pid], looked.pidfds)
    finally:
        looked.close()
    assert proc.wait(10) == -9


async def test_on_a_slave_a_task_past_its_reads_fails_its_listeners_with_it_and_looks_go_on(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hog (its descriptors past the look's reads, here 3,000) is failed, and the
    server it started in a session of its own (out of its group: the task's kill does not
    reach it) is killed with it; later looks go on: mallory's squatter on a port of the
    range not given to it is killed as before, alice's server on her port answers on."""
    monkeypatch.setattr(ports_isolator, "MOST_DESCRIPTORS", 3_000)
    base = free_port(12)
    await rig.start_slave(
        "s1", Resources(cpus=4, mem=2048), discrete=Discrete({PORTS: Ranges([(base, base + 9)])}),
        ports_isolation=True, ports_check_interval=0.2,
    )  # fmt: skip
    alice = await rig.framework("alice")
    await rig.launch(alice, f"PORT0={base} {port_server()}", "web", discrete=ports(base))
    await alice.update_for("web", TaskState.RUNNING)
    await eventually(lambda: answers(base), timeout=15)
    await rig.decline_next(alice, refuse=3600)
    mallory = await rig.framework("mallory")
    server = f"PORT0={base + 1} setsid {port_server()} &"  # (its own port: no squat)
    opens = 'f = [os.open("/dev/null", 0) for _ in range(4000)]'
    # (a child, not the shell's own process: after the server, read after it)
    hog = f"python3 -c 'import os, time; {opens}; time.sleep(600)'"
    connect = f'socket.socket().connect_ex(("127.0.0.1", {base + 1}))'
    wait = (
        f"python3 -c 'import socket, time; [time.sleep(0.05) for _ in iter(lambda: {connect}, 0)]'"
    )
    command = f"{server} {wait}; ulimit -n 8192; {hog}"
    await rig.launch(mallory, command, "hog", discrete=ports(base + 1))
    failed = await mallory.update_for("hog", TaskState.FAILED, timeout=20)
    assert failed.reason == Reason.CONTAINER_LIMITATION
    assert "open descriptors" in failed.message
    await eventually(lambda: not answers(base + 1), timeout=10)
    squat = f"PORT0={base + 5} {port_server()}"
    await rig.launch(mallory, squat, "squat", discrete=ports(base + 3))
    squatted = await mallory.update_for("squat", TaskState.FAILED, timeout=15)
    assert f"listened on port {base + 5}" in squatted.message
    assert answers(base)
