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

import pytest

from protocol.wire.messages import TaskState
from protocol.wire.resources import Resources

from harness.shared_slave import MALLORY, shared_slave
from harness.volume_race import (
    PLANT_CHOWN,
    TARGET,
    alices_secret,
    keep_volume,
    launch,
    relaunch,
    restoring,
    start_racer,
)

pytestmark = pytest.mark.timeout(300)
SECRET = "alice-secret-60a1"
VOLUME = "disk(mallory,mallory)[v1:a/b]"
TRIES = 80

# mallory's long task (its program in her volume: PLANT_CHOWN), its working directory the
# other task's sandbox: each time the slave takes `a` (root's, 0700) it puts its own `a`
# there instead, and swaps its `b` with a symlink for ever through a descriptor of it
SWAPPER = (
    PLANT_CHOWN
    + r"""
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
)


async def test_a_tenant_cannot_swap_the_held_way_while_the_sandbox_is_still_its_own() -> None:
    took = ""
    with restoring(TARGET):
        async with shared_slave(
            isolation="cgroups",
            base_in="/var/lib",
            resources=Resources(cpus=4, mem=2048, disk=1024),
        ) as s:
            await keep_volume(s, VOLUME)
            alices = await alices_secret(s, SECRET)

            await launch(s, "m2", "true", VOLUME)  # (its sandbox and a/b: mallory's)
            assert (await s.master.ends(MALLORY, "m2")).state == TaskState.FINISHED
            volume = s.work / "volumes" / "roles" / "mallory" / "v1"
            proof = s.work.parent / "proof"  # (root's directory: 0711)
            sandbox = s.sandbox(MALLORY, "m2")
            args = f"{volume} {sandbox} {TARGET} {proof} {alices}"
            await start_racer(s, SWAPPER, args, "watching")

            tries = await relaunch(s, VOLUME, TRIES, proof.exists)
            took = proof.read_text() if proof.exists() else ""
    assert not took, (
        f"after {tries} launches of m2, root ran mallory's `chown` from her volume, bound "
        f"over {TARGET} through her own `a`, put in place of the held one: {took!r}"
    )
