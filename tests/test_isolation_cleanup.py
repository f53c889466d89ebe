"""Isolation leaves nothing behind: a task's memory cgroup goes without its page cache
(else cgroup v1 keeps it, unseen, as a zombie), and what slaves that are gone left is
swept by the next slave to start (real cgroup v1 hierarchies here)."""

from __future__ import annotations

import fcntl
import os
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from protocol.tooling.brokers import MosquittoBroker
from protocol.wire.messages import TaskState
from protocol.wire.resources import Resources
from slave import cgroup_upkeep
from slave.cgroups import MB, Cgroups, detect
from slave.isolator import PARENT, CgroupsIsolator, container_name

from harness.cgroups import ROOT, cgroup_path, cgroups_slave, need_cgroups, new_slave_id
from harness.helpers import eventually
from harness.slave import Rig, master_rig


@pytest.fixture
async def rig(mosquitto: MosquittoBroker, tmp_path: Path) -> AsyncIterator[Rig]:
    need_cgroups()
    async with master_rig(mosquitto, tmp_path) as r:
        yield r


def _charged(memory: Path) -> int:
    """Page cache and user memory charged to a v1 memory cgroup and those below it, live
    or removed (a zombie's charge stays with its parent): its kernel memory not counted."""
    return int((memory / "memory.usage_in_bytes").read_text()) - int(
        (memory / "memory.kmem.usage_in_bytes").read_text()
    )


async def test_a_task_that_wrote_files_leaves_no_page_cache_when_its_cgroup_goes(
    rig: Rig,
) -> None:
    fw, sid, _ = await cgroups_slave(rig)
    parent = cgroup_path(sid)
    # 8 MB of page cache charged to the task: its sandbox's files, dirty at its end
    write = "head -c 4000000 /dev/zero > a; mkdir -p d; head -c 4000000 /dev/zero > d/b"
    await rig.launch(fw, write, "writer", Resources(cpus=0.1, mem=64))
    await fw.update_for("writer", TaskState.FINISHED)
    await eventually(
        lambda: not cgroup_path(sid, container_name(fw.framework_id, "writer")).exists(), 30
    )
    # the slave's parent holds what is left of it: nothing a zombie would keep
    assert _charged(parent) <= 1 * MB, f"{_charged(parent) / MB:.1f} MB left charged"


def _found() -> Cgroups:
    found = detect(ROOT, pids=False)
    assert not isinstance(found, str)
    return found


def _leftover(slave_id: str, name: str, age: float) -> Path:
    """An empty cgroup a slave left, made `age` seconds ago (v1: in each hierarchy)."""
    found = _found()
    path = f"{PARENT}/{slave_id}/{name}"
    found.make_spare(path)  # (an empty cgroup of ours)
    then = time.time() - age
    for controller in ("cpu", "cpuacct", "memory"):
        os.utime(ROOT / controller / path, (then, then))
    return ROOT / "memory" / path


async def test_a_starting_slave_sweeps_what_gone_slaves_left_and_spares_live_ones() -> None:
    need_cgroups()
    found = _found()
    gone, live = f"iso-gone-{uuid.uuid4().hex[:6]}", f"iso-live-{uuid.uuid4().hex[:6]}"
    old = _leftover(gone, "fw.old", age=3600)
    young = _leftover(gone, "fw.young", age=0)  # its slave may be about to start it
    theirs = _leftover(live, "fw.old", age=3600)  # a live slave's: it removes its own
    lock = cgroup_upkeep.hold(found, f"{PARENT}/{live}", log=None)
    assert lock is not None
    isolator = CgroupsIsolator(found, new_slave_id())
    try:
        await isolator.recover(set())
        assert isolator._sweep is not None
        await isolator._sweep
        assert not old.exists()
        assert not (ROOT / "cpu" / PARENT / gone / "fw.old").exists()
        assert young.exists()
        assert theirs.exists()
    finally:
        await isolator.close()
        os.close(lock)
        for slave_id in (gone, live):
            for child in found.children(f"{PARENT}/{slave_id}"):
                found.destroy(child)
            found.destroy(f"{PARENT}/{slave_id}")
    assert not (ROOT / "memory" / PARENT / live).exists()


async def test_a_gone_slaves_parent_goes_when_nothing_is_left_in_it() -> None:
    need_cgroups()
    gone = f"iso-gone-{uuid.uuid4().hex[:6]}"
    _leftover(gone, "fw.old", age=3600)
    isolator = CgroupsIsolator(_found(), new_slave_id())
    try:
        await isolator.recover(set())
        assert isolator._sweep is not None
        await isolator._sweep
    finally:
        await isolator.close()
    for controller in ("cpu", "cpuacct", "memory"):
        assert not (ROOT / controller / PARENT / gone).exists()
    assert not (ROOT / "memory" / isolator.parent).exists()  # its own, at its close


async def test_a_slave_that_launched_before_any_recovery_is_not_swept_as_gone() -> None:
    """Its first task locks its parent (the suite's failure of 2026-12-07: another slave's
    sweep took an unlocked parent for a gone slave's and removed a principal's group made
    a moment before its task's cgroup)."""
    need_cgroups()
    found = _found()
    first = CgroupsIsolator(found, new_slave_id())
    try:
        container = await first.prepare("fw.t", Resources(cpus=0.1, mem=32), principal="alice")
        fd = os.open(found.lock_dir(first.parent), os.O_RDONLY | os.O_DIRECTORY)
        try:
            with pytest.raises(BlockingIOError):  # (as a sweeping slave finds it)
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        await container.destroy()
    finally:
        await first.close()
    assert not (ROOT / "memory" / first.parent).exists()


class _Dirty:
    """Cgroups whose memory cgroups stay dirty: a release goes only when forced."""

    def __init__(self) -> None:
        self.there: set[str] = set()
        self.forced: list[str] = []
        self.destroyed: list[str] = []
        self.looks = 0

    def release(self, name: str, force: bool = False, memory: bool = True) -> bool:
        self.looks += 1
        if memory and force:
            self.there.discard(name)
            self.forced.append(name)
        return name not in self.there

    def kill(self, name: str) -> None:
        return None

    def uncharged(self, name: str) -> bool:
        return False  # (dirty pages)

    def pids(self, name: str) -> list[int]:
        return []

    def children(self, parent: str) -> list[str]:
        return []

    def make_spare(self, name: str) -> bool:
        return False

    def destroy(self, name: str) -> None:
        self.there.discard(name)
        self.destroyed.append(name)


async def test_a_stopping_slave_removes_its_cgroups_though_their_pages_stay_dirty() -> None:
    dirty = _Dirty()
    upkeep = cgroup_upkeep.Upkeep(dirty, "drfmesos/s", log=None)  # type: ignore[arg-type]
    dirty.there |= {"drfmesos/s/fw.a", "drfmesos/s/fw.b"}
    upkeep.add("drfmesos/s/fw.a")
    upkeep.add("drfmesos/s/fw.b")
    await eventually(lambda: dirty.looks >= 2)  # looked at, and kept: dirty
    t0 = time.monotonic()
    await upkeep.close()
    assert dirty.there == set()
    assert sorted(dirty.forced) == ["drfmesos/s/fw.a", "drfmesos/s/fw.b"]
    assert time.monotonic() - t0 < cgroup_upkeep.CLOSING + 2  # no longer than its wait


async def test_a_task_id_used_again_finds_its_old_cgroup_gone_first() -> None:
    dirty = _Dirty()
    upkeep = cgroup_upkeep.Upkeep(dirty, "drfmesos/s", log=None)  # type: ignore[arg-type]
    dirty.there.add("drfmesos/s/fw.a")
    upkeep.add("drfmesos/s/fw.a")
    assert "drfmesos/s/fw.a" in upkeep
    await upkeep.take_back("drfmesos/s/fw.a")
    assert dirty.destroyed == ["drfmesos/s/fw.a"]
    assert "drfmesos/s/fw.a" not in upkeep
    await upkeep.close()
