"""Review 59: a tenant with a persistent volume at a nested path (`disk(...)[v1:a/b]`)
has root mount it over a directory of the host's in its task's namespace, and root then
runs the tenant's program: root on the host.

The slave keeps a sandbox root's (0700) while the task's first shell, as root, binds the
volume at `SANDBOX/a/b`: so that "no process of the user can swap a place, or a
directory on its way, for a symlink between this check and the bind" (slave.confine).
But `SANDBOX/a` is the tenant's own directory (made for the volume's path, its user's),
and a process of that user that was already in it -- another task of the tenant's, its
working directory there since the sandbox's last run -- is not stopped by the sandbox's
mode: it swaps `b` for a symlink and back, over and over. When `b` is a directory as the
script checks it (`[ -d ]`, `realpath -e`) and a symlink as `mount` resolves it, root
binds the volume over the symlink's target: here /usr/local/sbin, first on the PATH root's
steps run with (task_env.ROOT_ENV). The next step, `chown` of the sandbox back to its
user, is then the tenant's `chown`, from its volume, run as root. (On the way the slave,
root, also `chmod`s through the same symlink while it makes the volume's place:
`volumes.prepare` -> `sandbox.make_dir`, whose `os.chmod` follows links.)

A real slave as root with task users, PID namespaces and cgroups (harness.shared_slave),
its work dir under /var/lib (as the docs advise: a /tmp of each task's own). mallory's
program writes, as root, a file in a directory only root may write, and copies alice's
secret out of her sandbox. A race: the launch is tried again until it wins, 60 times at
most (it won after 5, 38 and 13 launches in three runs here).
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

pytestmark = pytest.mark.timeout(240)
SECRET = "alice-secret-5e11"
VOLUME = "disk(mallory,mallory)[v1:a/b]"
TRIES = 60

# mallory's long task: its program in her volume (PLANT_CHOWN), then, its working
# directory in the other task's sandbox's `a`, `b` swapped with a symlink for ever
FLIPPER = (
    PLANT_CHOWN
    + r"""
if not os.path.islink("c"):
    os.symlink(target, "c")
AT_FDCWD, RENAME_EXCHANGE = -100, 2
print("flipping", flush=True)
while True:
    renameat2(AT_FDCWD, b"b", AT_FDCWD, b"c", RENAME_EXCHANGE)
"""
)


async def test_a_tenant_cannot_have_root_bind_its_volume_over_the_hosts_path() -> None:
    with restoring(TARGET):  # (the slave's chmod through the link, undone)
        async with shared_slave(
            isolation="cgroups",
            base_in="/var/lib",
            resources=Resources(cpus=4, mem=2048, disk=1024),
        ) as s:
            await keep_volume(s, VOLUME)
            alices = await alices_secret(s, SECRET)

            await launch(s, "m2", "true", VOLUME)  # (its sandbox and `a/b`: mallory's)
            assert (await s.master.ends(MALLORY, "m2")).state == TaskState.FINISHED
            volume = s.work / "volumes" / "roles" / "mallory" / "v1"
            proof = s.work.parent / "proof"  # (root's directory: 0711)
            place = s.sandbox(MALLORY, "m2") / "a"
            args = f"{volume} {place} {TARGET} {proof} {alices}"
            await start_racer(s, FLIPPER, args, "flipping")

            tries = await relaunch(s, VOLUME, TRIES, proof.exists)
            took = proof.read_text() if proof.exists() else ""
    assert not took, (
        f"after {tries} launches of m2, root ran mallory's `chown` from her volume, bound "
        f"over {TARGET}; it wrote into a root-only directory: {took!r}"
    )
