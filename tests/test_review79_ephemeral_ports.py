"""Review 79: one tenant's task binds every ephemeral port of the slave's network, and
then no other tenant's task (nor the slave) can open a TCP connection at all.

Tasks share the host's network namespace (docs/how-to/isolation.md, "What tenants still
share"), and the slave's ports isolator looks only at the ports of the slave's `ports`
range ("What it does not cover: ports outside the slave's range"). The kernel's
ephemeral range (`net.ipv4.ip_local_port_range`, 32768-60999) is outside it, and every
outgoing connection takes its local port from there: a port bound by anyone (bound, not
even listening) is skipped. mallory's task, 0.1 cpus and 512 MB, binds each port of the
range on 0.0.0.0 (28,232 sockets: three processes under the open-file limit the slave
passes on). Then alice's task, whose listener was up before, cannot connect even to it
(EADDRNOTAVAIL), and neither can the slave: its TCP and HTTP health checks of alice's
tasks fail (and kill them after their consecutive failures), and so would its
reconnection to the broker. Nothing is killed or said: the isolator does not look there.

The docs name what a tenant can reach through the shared network (another's loopback
ports, abstract sockets, the socket tables) and that it may squat a port of the range
for a few seconds; nowhere that one tenant's task can cut every other tenant's tasks,
and the slave, off the network for as long as it runs. The project's promise: one whose
tasks run beside yours reaches nothing of yours; a tenant relies on her task's
connections (to her database, to her own listener, the slave's checks of it).

Since: a tenant's task starts with 1,024 open files (its soft limit, not the slave's),
and the ports isolator kills a task that holds more than MOST_OTHER_PORTS ports outside
the slave's range (REASON_CONTAINER_LIMITATION). mallory's task here lifts its soft
limit to its hard one, as an attacker would, and fills the range: it is killed at the
isolator's next look, and then alice's task and the slave connect again. (Between its
bind and that look, a few seconds, they cannot: the docs say so.)

A real slave as root with task users and PID namespaces (harness.shared_slave), all of it
in a network namespace of the test's own (made for the test's thread and left after
it), so that the exhaustion reaches nothing else on this machine.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shlex
import socket
import subprocess
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from protocol.wire.discrete import EMPTY, Ranges
from protocol.wire.messages import Reason, TaskState
from protocol.wire.resources import Resources
from slave.ports_isolator import MOST_OTHER_PORTS, MOST_PRINCIPAL_OTHER_PORTS, hoarders

from harness.helpers import eventually
from harness.shared_slave import ALICE, MALLORY, shared_slave

CLONE_NEWNET = 0x40000000
BIG = Resources(cpus=0.1, mem=512)  # (mallory's: some 28,000 sockets' kernel memory)

ALICE_TASK = """
import os, socket, time
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen()
port = listener.getsockname()[1]
print("listening", port, flush=True)
while not os.path.exists("go"):
    time.sleep(0.05)
try:
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    print("connected", flush=True)
except OSError as e:
    print("cannot connect:", e, flush=True)
"""

MALLORY_TASK = """
import os, resource, signal, socket
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
print("nofile", soft, flush=True)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
ports = list(range(low, high + 1))
r, w = os.pipe()
for part in range(3):
    if os.fork() == 0:
        held = []
        for port in ports[part::3]:
            try:
                s = socket.socket()
            except OSError:
                break
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                s.close()
                continue
            held.append(s)
        os.write(w, b"%d\\n" % len(held))
        while True:
            signal.pause()
f = os.fdopen(r)
print("full", sum(int(f.readline()) for _ in range(3)), "of", len(ports), flush=True)
while True:
    signal.pause()
"""


def python(script: str) -> str:
    return shlex.join(["/usr/bin/python3", "-I", "-c", script])


@contextlib.contextmanager
def own_network() -> Iterator[None]:
    """This thread (and what it starts) in a new network namespace, its loopback up."""
    libc = ctypes.CDLL(None, use_errno=True)
    before = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        if libc.unshare(CLONE_NEWNET) != 0:
            pytest.skip(f"no network namespace: {os.strerror(ctypes.get_errno())}")
        try:
            subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
            yield
        finally:
            if libc.setns(before, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "could not return to the test's network")
    finally:
        os.close(before)


async def test_a_tenants_task_cannot_take_every_ephemeral_port() -> None:
    with own_network():
        async with shared_slave() as s:
            await s.master.run("alice", ALICE, "a1", python(ALICE_TASK))
            await s.master.reaches(ALICE, "a1", TaskState.RUNNING)
            await eventually(lambda: "listening" in s.output_so_far(ALICE, "a1"), timeout=20)
            port = int(s.output(ALICE, "a1").split()[1])
            await s.master.run("mallory", MALLORY, "m1", python(MALLORY_TASK), resources=BIG)
            await eventually(lambda: "full" in s.output_so_far(MALLORY, "m1"), timeout=30)
            full = s.output(MALLORY, "m1").strip()
            assert full.startswith("nofile 1024\n"), full  # (not the slave's)
            ended = await s.master.ends(MALLORY, "m1", timeout=30)  # (the isolator's look)
            assert ended.state == TaskState.FAILED, ended
            assert ended.reason == Reason.CONTAINER_LIMITATION, ended
            assert "ports outside the slave's range" in ended.message, ended
            try:  # (the slave's own connection, as its TCP check of alice's task makes)
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
                slave = "connected"
            except OSError as e:
                slave = str(e)
            (s.sandbox(ALICE, "a1") / "go").touch()
            await s.master.ends(ALICE, "a1")
            said = s.output(ALICE, "a1")
    assert "connected" in said.splitlines(), (
        f"mallory's task ({full}) left alice's task unable to connect to its own listener "
        f"({said.splitlines()[-1]!r}); the slave: {slave!r}"
    )


def test_many_tasks_of_one_principal_are_held_to_their_bound_together() -> None:
    """Each under MOST_OTHER_PORTS, six of mallory's tasks took 5,900 of the range: her
    biggest holders go until hers hold at most MOST_PRINCIPAL_OTHER_PORTS; alice's task,
    one of the range's users as much, is left alone."""
    low = 40_000

    def task(principal: str) -> tuple[Any, Any]:
        return SimpleNamespace(principal=principal, info=SimpleNamespace(discrete=EMPTY)), None

    def holding(n: int, at: int) -> dict[int, set[int]]:
        return {port: {1} for port in range(at, at + n)}

    runners = {g: task("mallory") for g in range(1, 7)} | {7: task("alice")}
    sizes = {1: 1_000, 2: 1_000, 3: 1_000, 4: 1_000, 5: 1_000, 6: 900, 7: 1_000}
    ports = {g: holding(n, low + 1_000 * g) for g, n in sizes.items()}
    over = hoarders(ports, runners, Ranges.parse("[31000-32000]"))
    assert sorted(over) == [1, 2]  # (5,900 - 2,000: hers under 4,096; alice's untouched)
    assert len(over[1]) == 1_000
    solo = hoarders({1: holding(MOST_OTHER_PORTS + 1, low)}, {1: task("bob")}, Ranges())
    assert list(solo) == [1]
    assert MOST_PRINCIPAL_OTHER_PORTS == 4 * MOST_OTHER_PORTS
