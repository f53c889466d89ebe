"""mallory's races against a slave as root over the way to her nested persistent volume
(review59, review60): the slave (harness.shared_slave) keeps her volume; a long task of
hers runs a program that swaps a place on that way with a symlink, over and over; and m2,
the task with the volume, is launched again and again until the race is won or the tries
run out."""

from __future__ import annotations

import contextlib
import functools
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from protocol.wire.messages import CheckpointResources, TaskState
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.shared_slave import ALICE, MALLORY, Shared, T

TARGET = Path("/usr/local/sbin")  # first on root's PATH, and empty on most hosts

# what a racer that wins has root run: its program in mallory's volume (hers to write, by
# its path) in place of `chown`, which proves it ran as root and copies alice's secret
PLANT_CHOWN = r"""
import ctypes, os, sys
volume, place, target, proof, alices = sys.argv[1:6]
program = f'''#!/bin/sh
echo "root? $(/usr/bin/id -u)" > {proof}
/usr/bin/cat {alices} >> {proof}
exec /usr/bin/chown "$@"
'''
with open(os.path.join(volume, "chown"), "w") as f:
    f.write(program)
os.chmod(os.path.join(volume, "chown"), 0o755)
os.chdir(place)
libc = ctypes.CDLL(None, use_errno=True)
renameat2 = libc.renameat2
"""


async def keep_volume(s: Shared, volume: str) -> None:
    """The slave checkpoints `volume` (16 MB) and has it."""
    keep = CheckpointResources(
        slave_id=s.master.slave_id, resources=Resources({volume: 16}), version=1
    )
    await s.master.bus.publish(T.slave("slave", s.master.slave_id), keep)
    await eventually(lambda: volume in s.slave.resources.total.millis)


async def launch(s: Shared, task_id: str, command: str, volume: str | None) -> None:
    """A task of mallory's (with `volume`, if one)."""
    resources = Resources(cpus=0.1, mem=64) + (Resources({volume: 16}) if volume else Resources())
    await s.master.run("mallory", MALLORY, task_id, command, resources=resources)


async def alices_secret(s: Shared, secret: str) -> Path:
    """alice's task a1, running, with `secret` in its sandbox: the file's path."""
    await s.master.run(
        "alice", ALICE, "a1", 'echo "$S" > secret; exec sleep 300', env={"S": secret}
    )
    await s.master.reaches(ALICE, "a1", TaskState.RUNNING)
    alices = s.sandbox(ALICE, "a1") / "secret"
    await eventually(alices.exists)
    return alices


async def start_racer(s: Shared, script: str, args: str, ready: str) -> None:
    """mallory's task m1 running `script` (python, in root's directory beside the work
    dir) with `args`, once it has said `ready`."""
    racer = s.work.parent / "race.py"
    racer.write_text(script)
    os.chmod(racer, 0o644)
    await launch(s, "m1", f"exec /usr/bin/python3 {racer} {args}", volume=None)
    await eventually(lambda: ready in s.output_so_far(MALLORY, "m1"), timeout=30)


async def relaunch(s: Shared, volume: str, tries: int, won: Callable[[], bool]) -> int:
    """m2, with `volume`, launched again after each end until `won()` or `tries` launches:
    how many it took."""
    tried = 0
    while tried < tries and not won():
        tried += 1
        before = len(s.master.states(MALLORY, "m2"))
        await launch(s, "m2", "true", volume=volume)
        await eventually(functools.partial(s.master.ended_after, MALLORY, "m2", before), timeout=30)
    return tried


@contextlib.contextmanager
def restoring(target: Path) -> Iterator[None]:
    """`target`'s owner and mode put back on leaving (a lost race's chmod through a link,
    undone)."""
    was = os.stat(target)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.chown(target, was.st_uid, was.st_gid, follow_symlinks=False)
            os.chmod(target, stat.S_IMODE(was.st_mode))
