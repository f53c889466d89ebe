"""Disk a tenant's task holds where the disk watch does not look (attack92).

The watch measures a running task's sandbox by walking it: what is not a name in it is
not counted. Two ways a task on a root slave (a /tmp of its own, its principal's user)
held three times its disk and ran on, look after look, on this machine:

- a file it unlinked and holds open (`du`'s blind spot, Mesos's disk/du's too): 12 MB
  written through the descriptor, 0 MB seen;
- an ended sandbox of its own principal's (its user's, the framework's directory lets
  it pass): no task's sandbox is measured once its task has ended, and it is kept for
  `--gc-delay`.

Neither is held short of the kernel's quotas (Mesos's disk/xfs: a project quota per
sandbox) or of counting the open files of a task's processes (and the descriptors it
passes in flight, which no /proc lists) and keeping ended sandboxes from their user:
left as known, strict xfails, said in the isolation how-to's "Not held".
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from protocol.tooling.brokers import MosquittoBroker
from protocol.wire.messages import Reason, TaskState
from protocol.wire.resources import Resources

from harness.fakes import FakeFramework
from harness.slave import Rig, root_work

OVER = Resources(cpus=0.1, mem=32, disk=4)  # (12 MB written: three times its disk)


@contextlib.asynccontextmanager
async def watched_slave(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> AsyncIterator[tuple[Rig, FakeFramework]]:
    """A root slave that measures sandboxes every 0.2 s, its work dir under /var/lib (so
    that its tasks get a /tmp of their own), and a framework on it."""
    async with root_work(mosquitto, tmp_path, "drfmesos-disk-") as w:
        rig = w.rig
        fw = await rig.framework("mallory")
        await w.start_slave(
            "--resources", "cpus:2;mem:512;disk:100",
            "--container-disk-watch-interval", "0.2",
        )  # fmt: skip
        yield rig, fw


async def assert_killed_for_its_disk(fw: FakeFramework, task_id: str) -> None:
    failed = await fw.update_for(task_id, TaskState.FAILED, timeout=15)  # (75 looks)
    assert failed.reason == Reason.DISK_LIMIT


@pytest.mark.xfail(strict=True, reason="an unlinked file held open is in no sandbox walk")
async def test_a_file_unlinked_and_held_open_counts(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    async with watched_slave(mosquitto, tmp_path) as (rig, fw):
        hidden = "exec 3>/tmp/hidden; rm /tmp/hidden; head -c 12M /dev/zero >&3; exec sleep 300"
        await rig.launch(fw, hidden, "over", OVER)
        await fw.update_for("over", TaskState.RUNNING, timeout=20)
        await assert_killed_for_its_disk(fw, "over")


@pytest.mark.xfail(strict=True, reason="an ended sandbox is its user's, and measured by none")
async def test_what_a_task_writes_in_its_principals_ended_sandbox_counts(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    async with watched_slave(mosquitto, tmp_path) as (rig, fw):
        await rig.launch(fw, "true", "t1")
        await fw.update_for("t1", TaskState.FINISHED, timeout=20)
        stash = "head -c 12M /dev/zero > ../t1/stash && exec sleep 300"
        await rig.launch(fw, stash, "over", OVER)
        await fw.update_for("over", TaskState.RUNNING, timeout=20)
        await assert_killed_for_its_disk(fw, "over")
