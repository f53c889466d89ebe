"""Review 59: a tenant has the slave, root, give it a directory of the host's: the slave
makes a volume's place in a sandbox (`volumes.prepare`) through a symlink the tenant put
on its way.

A volume at a nested path (`disk(...)[v1:a/b/sbin]`) has its place made in the task's
sandbox before the task starts, while the sandbox is its user's (0700, the tenant's own):
each part of the path is checked a directory (`_plain_dir_or_nothing`), then made or
taken (`sandbox.make_dir`: mkdir, `os.chown(follow_symlinks=False)`, `os.chmod`). Only
the last part is not followed: another task of the tenant's swaps `a/b` with a symlink to
`/usr/local` over and over, and when it is the link as the slave takes `a/b/sbin`, the
slave chowns `/usr/local/sbin` -- the first directory on root's PATH, the slave's root
steps' own (task_env.ROOT_ENV) -- to the tenant (and chmods it 0700). The tenant's next
file there named `mount` is what root runs at each task's start on this slave; no race
with the task's own shell is needed (tests/test_review59_volume_mount_race.py's).

Here the link points at a decoy of root's (`decoy/sbin`, 0755), not at /usr/local. A
real slave as root with task users, PID namespaces and cgroups (harness.shared_slave). A
race: the launch is tried again, 100 times at most, until the decoy changes owner.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from protocol.wire.messages import (
    TaskState,
)
from protocol.wire.resources import Resources

from harness.shared_slave import MALLORY, shared_slave
from harness.volume_race import keep_volume, launch, relaunch, start_racer

pytestmark = pytest.mark.timeout(240)
VOLUME = "disk(mallory,mallory)[v1:a/b/sbin]"
TRIES = 100

FLIPPER = r"""
import ctypes, os, sys
place, decoy = sys.argv[1:3]
link = os.path.join(place, "c")
if not os.path.islink(link):
    os.symlink(decoy, link)
libc = ctypes.CDLL(None, use_errno=True)
b, c = os.path.join(place, "b").encode(), link.encode()
print("flipping", flush=True)
while True:
    libc.renameat2(-100, b, -100, c, 2)  # (AT_FDCWD, RENAME_EXCHANGE)
"""


def owner(path: Path) -> int:
    return os.lstat(path).st_uid


async def test_the_slave_gives_a_tenant_no_directory_through_a_link_in_its_sandbox() -> None:
    async with shared_slave(
        isolation="cgroups", base_in="/var/lib", resources=Resources(cpus=4, mem=2048, disk=1024)
    ) as s:
        await keep_volume(s, VOLUME)
        decoy = s.work.parent / "decoy"  # (as /usr/local: root's, sbin in it)
        (decoy / "sbin").mkdir(parents=True)
        os.chmod(decoy, 0o755)
        os.chmod(decoy / "sbin", 0o755)

        await launch(s, "m2", "true", VOLUME)  # (its sandbox and a/b/sbin: mallory's)
        assert (await s.master.ends(MALLORY, "m2")).state == TaskState.FINISHED
        place = s.sandbox(MALLORY, "m2") / "a"
        await start_racer(s, FLIPPER, f"{place} {decoy}", "flipping")
        await s.master.reaches(MALLORY, "m1", TaskState.RUNNING)

        tries = await relaunch(s, VOLUME, TRIES, lambda: owner(decoy / "sbin") != 0)
        taken = owner(decoy / "sbin")
        mode = oct(os.lstat(decoy / "sbin").st_mode & 0o777)
    assert taken == 0, (
        f"after {tries} launches of m2, the slave chowned the decoy's sbin (root's, as "
        f"/usr/local/sbin) to mallory's uid {taken}, mode {mode}, through her link"
    )
