"""Attack 95: a task's TCP buffers were no one's memory on a cgroup v1 slave.

A v1 memory cgroup is charged for its sockets' TCP buffers only once its own TCP limit
(`memory.kmem.tcp.limit_in_bytes`) is set, which the slave never did: mallory's 64 MB
task opened 1,500 loopback connections, filled them, and held 2.2 GB of the host's
memory in their buffers (past the host's tcp_mem), its cgroup charged 15 MB; this test's
300 held 1.26 GB. Now it stops at about 80 MB. Now the slave sets
each task's TCP limit to its memory limit: what it queues stops there.

Real slave as root, real users and cgroups (`harness.shared_slave`); v1 only (v2
charges TCP buffers to the cgroup's memory already)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from protocol.wire.resources import Resources
from slave import cgroupfs
from slave.cgroups import CgroupsV1, Limits, detect

from harness.shared_slave import MALLORY, shared_slave

V1_TCP = Path("/sys/fs/cgroup/memory/memory.kmem.tcp.limit_in_bytes")
pytestmark = pytest.mark.timeout(120)

# 300 loopback connections whose reader never reads, each written until it blocks: the
# bytes queued (a 64 MB task on an unbounded host: ~4 MB a connection, 1.26 GB)
FILL = r"""
import socket
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(512)
queued, kept = 0, []
for _ in range(300):
    c = socket.create_connection(server.getsockname())
    s, _ = server.accept()
    kept += [c, s]
    c.setblocking(False)
    chunk = b"x" * 65536
    try:
        while True:
            queued += c.send(chunk)
    except OSError:  # (BlockingIOError: full)
        pass
own = open("/proc/self/cgroup").read().split(":memory:")[1].split()[0]
limit = open(f"/sys/fs/cgroup/memory{own}/memory.kmem.tcp.limit_in_bytes").read().strip()
print("queued", queued, "tcp_limit", limit)
"""


@pytest.mark.skipif(not V1_TCP.exists(), reason="no cgroup v1 memory hierarchy with TCP")
async def test_a_tasks_tcp_buffers_are_held_to_its_memory() -> None:
    async with shared_slave(isolation="cgroups") as s:
        await s.master.run(
            "mallory", MALLORY, "fill", f"exec python3 -c '{FILL}'",
            resources=Resources(cpus=0.5, mem=64),
        )  # fmt: skip
        await s.master.ends(MALLORY, "fill", timeout=90)
        out = s.output(MALLORY, "fill")
        words = out.split()
        assert "queued" in words, out
        queued, limit = int(words[words.index("queued") + 1]), words[-1]
        assert limit == str(64 * 2**20), out  # its memory limit, set by the slave
        assert queued < 2 * 64 * 2**20, (
            f"a 64 MB task queued {queued / 2**20:.0f} MB in its TCP buffers: {out}"
        )


def _v1(tmp_path: Path) -> CgroupsV1:
    for controller in ("cpu", "cpuacct", "memory"):
        (tmp_path / controller).mkdir()
        (tmp_path / controller / "cgroup.procs").write_text("")
    (tmp_path / "memory" / "memory.kmem.tcp.limit_in_bytes").write_text("0")
    found = detect(tmp_path)
    assert isinstance(found, CgroupsV1)
    return found


@pytest.mark.parametrize(("error", "kept_on"), [(errno.EBUSY, True), (errno.EINVAL, False)])
def test_a_tcp_limit_the_kernel_refuses_leaves_the_others_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: int, kept_on: bool
) -> None:
    """A shrink below what a task's buffers hold (EBUSY: TCP is no part of the usage a
    shrink reads) leaves that task's TCP limit as it was, and every other task's held;
    a kernel that does not take the file at all (EINVAL) is asked no more."""
    cgroups = _v1(tmp_path)
    assert cgroups.tcp
    tcp = "memory.kmem.tcp.limit_in_bytes"
    cgroups.create("drfmesos/s1/a", Limits(cpus=1, mem_mb=256))
    write = cgroupfs.write

    def refusing(path: object, value: object) -> None:
        if getattr(path, "rel", str(path)).endswith(f"/a/{tcp}"):
            raise OSError(error, os.strerror(error))
        write(path, value)  # type: ignore[arg-type]

    monkeypatch.setattr(cgroupfs, "write", refusing)
    cgroups.limit("drfmesos/s1/a", Limits(cpus=1, mem_mb=64), Limits(cpus=1, mem_mb=256))
    memory = tmp_path / "memory" / "drfmesos" / "s1"
    assert (memory / "a" / "memory.limit_in_bytes").read_text() == str(64 << 20)
    assert (memory / "a" / tcp).read_text() == str(256 << 20)  # (as it was)
    assert cgroups.tcp is kept_on
    cgroups.create("drfmesos/s1/b", Limits(cpus=1, mem_mb=32))
    assert (memory / "b" / tcp).exists() is kept_on
