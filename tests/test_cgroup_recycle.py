"""A finished task's cgroup is recycled for the next task (no mkdir, no rmdir) only when
it is as good as new: the next task is never charged for the last one's memory, never
sees its peak or CPU time, and holds its own limits (v1, for real)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.wire.messages import TaskState
from protocol.wire.resources import Resources
from slave import cgroup_upkeep
from slave.cgroups import MB, CgroupsV1, Limits
from slave.isolator import PARENT, container_name

from harness.cgroups import (  # noqa: F401
    ROOT,
    cgroup_path,
    cgroups_slave,
    need_cgroups,
    rig,
    task_cgroup,
)
from harness.helpers import eventually
from harness.slave import Rig

# a task that uses memory (a 32 MB buffer) and CPU, and writes no file
WORK = (
    "dd if=/dev/zero of=/dev/null bs=32M count=2 2>/dev/null; "
    "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done"
)
UNLIMITED = 9223372036854771712  # v1's memory.limit_in_bytes with no limit (a page short of 2^63)


@pytest.fixture
def v1() -> Iterator[tuple[CgroupsV1, str]]:
    need_cgroups()
    cgroups = CgroupsV1(ROOT, pids=False)
    parent = f"{PARENT}/recycle-{uuid.uuid4().hex[:8]}"
    yield cgroups, parent
    for child in cgroups.children(parent):
        cgroups.destroy(child)
    with contextlib.suppress(OSError):
        cgroups.destroy(parent)


def _run_in(cgroups: CgroupsV1, name: str, script: str, cwd: Path | None = None) -> None:
    files = " ".join(str(f) for f in cgroups.procs_files(name))
    join = f'for f in {files}; do echo 0 > "$f"; done; '
    subprocess.run(["/bin/sh", "-c", join + script], check=False, cwd=cwd, timeout=60)


def _read(cgroups: CgroupsV1, controller: str, name: str, file: str) -> str:
    return (cgroups.mounts[controller] / name / file).read_text().strip()


def test_a_reset_leaves_a_cgroup_no_peak_or_cpu_time_of_its_last_task(
    v1: tuple[CgroupsV1, str],
) -> None:
    cgroups, parent = v1
    name = f"{parent}/fw.a"
    cgroups.create(name, Limits(cpus=0.5, mem_mb=128))
    _run_in(cgroups, name, WORK)
    used = cgroups.usage(name)
    assert used.memory_peak_bytes >= 32 * MB  # what must not reach the next task
    assert used.cpu_user_seconds + used.cpu_system_seconds > 0
    cgroups.reset(name)
    fresh = cgroups.usage(name)
    # (the kernel resets a peak to what is charged at the reset, a few pages; the charge may
    # shrink by a page before it is read, so the peak is at least the charge, not equal to it)
    assert fresh.memory_bytes <= fresh.memory_peak_bytes < 1 * MB
    assert fresh.cpu_user_seconds == fresh.cpu_system_seconds == 0


def test_a_recycled_cgroup_is_renamed_and_takes_the_next_tasks_limits(
    v1: tuple[CgroupsV1, str],
) -> None:
    cgroups, parent = v1
    first, spare, second = f"{parent}/fw.a", f"{parent}/~spare-1", f"{parent}/fw.b"
    held = Limits(cpus=0.5, mem_mb=128)
    cgroups.create(first, held)
    _run_in(cgroups, first, "true")  # (a task loop's: it leaves nothing charged)
    assert cgroups.recycle({first: (spare, held)}) == {first}
    for mount in cgroups.hierarchies:
        assert not (mount / first).exists()
        assert (mount / spare).is_dir()
    fresh = cgroups.usage(spare)
    assert fresh.memory_peak_bytes == fresh.memory_bytes == 0
    assert fresh.cpu_user_seconds == fresh.cpu_system_seconds == fresh.cpu_throttled_seconds == 0

    # the next task's limits, from the ones it still holds: a CFS cap where it had none
    assert cgroups.create(second, Limits(cpus=0.25, mem_mb=32, cfs=True), spare, held)
    assert _read(cgroups, "cpu", second, "cpu.shares") == "256"
    assert _read(cgroups, "cpu", second, "cpu.cfs_quota_us") == "25000"
    assert _read(cgroups, "memory", second, "memory.limit_in_bytes") == str(32 * MB)
    if cgroups.memsw:
        assert _read(cgroups, "memory", second, "memory.memsw.limit_in_bytes") == str(32 * MB)
    # and back: no cap, no memory limit
    capped = Limits(cpus=0.25, mem_mb=32, cfs=True)
    assert cgroups.recycle({second: (spare, capped)}) == {second}
    cgroups.create(first, Limits(cpus=1.0), spare, capped)
    assert _read(cgroups, "cpu", first, "cpu.shares") == "1024"
    assert _read(cgroups, "cpu", first, "cpu.cfs_quota_us") == "-1"
    assert _read(cgroups, "memory", first, "memory.limit_in_bytes") == str(UNLIMITED)


@pytest.mark.parametrize(
    "why",
    [
        "a file its task wrote (page cache charged)",
        "an OOM kill",
        "CFS throttling",
        "a process",
        "a cgroup below it (podman's)",
    ],
)
async def test_a_cgroup_is_not_recycled_with_what_the_next_task_would_inherit(
    v1: tuple[CgroupsV1, str], tmp_path: Path, why: str
) -> None:
    cgroups, parent = v1
    name = f"{parent}/fw.a"
    limits = Limits(cpus=0.1, mem_mb=16, cfs=True)
    cgroups.create(name, limits)
    sleeper = None
    if why.startswith("a file"):
        _run_in(cgroups, name, "dd if=/dev/zero of=out bs=1M count=4 2>/dev/null", tmp_path)
    elif why == "an OOM kill":
        _run_in(cgroups, name, "dd if=/dev/zero of=/dev/null bs=64M count=1 2>/dev/null")
        assert cgroups.oom_kills(name) == 1
    elif why == "CFS throttling":
        _run_in(cgroups, name, "i=0; while [ $i -lt 60000 ]; do i=$((i+1)); done")
        assert cgroups.usage(name).cpu_throttled_seconds > 0
    elif why.startswith("a cgroup"):
        (cgroups.mounts["memory"] / name / "libpod").mkdir()
    else:
        files = " ".join(str(f) for f in cgroups.procs_files(name))
        sleeper = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", f'for f in {files}; do echo 0 > "$f"; done; exec sleep 60'
        )
    try:
        if sleeper is not None:
            await eventually(lambda: bool(cgroups.pids(name)))
        assert cgroups.recycle({name: (f"{parent}/~spare-1", limits)}) == set()
        for mount in cgroups.hierarchies:  # left as it was, for its removal
            assert (mount / name).is_dir()
            assert not (mount / parent / "~spare-1").exists()
    finally:
        if sleeper is not None:
            sleeper.kill()
            await sleeper.wait()


async def test_a_task_loops_next_task_gets_the_last_ones_cgroup_with_nothing_of_it(
    rig: Rig,  # noqa: F811
) -> None:
    fw, sid, slave = await cgroups_slave(rig)
    resources = Resources(cpus=0.5, mem=128)
    await rig.launch(fw, "true", "first", resources)
    await fw.update_for("first", TaskState.RUNNING)
    first = cgroup_path(sid, container_name(fw.framework_id, "first"))
    inode = first.stat().st_ino
    await fw.update_for("first", TaskState.FINISHED, timeout=20)
    await eventually(lambda: not first.exists())

    await rig.launch(fw, "sleep 300", "next", resources)
    await fw.update_for("next", TaskState.RUNNING)
    following = cgroup_path(sid, container_name(fw.framework_id, "next"))
    assert following.stat().st_ino == inode  # the first's cgroup, recycled
    usage = slave.isolator.cgroups.usage(task_cgroup(sid, container_name(fw.framework_id, "next")))  # type: ignore[attr-defined]
    assert usage.memory_peak_bytes < 16 * MB
    assert (following / "memory.limit_in_bytes").read_text().strip() == str(128 * MB)

    await slave.stop(kill_tasks=True)
    for controller in ("cpu", "cpuacct", "memory"):  # its spares gone too
        below = ROOT / controller / PARENT / sid
        assert not below.exists() or not [p for p in below.iterdir() if p.is_dir()]


class _Recycling:
    """A cgroupfs stand-in whose every finished cgroup is as good as new."""

    version = 1

    def __init__(self) -> None:
        self.there: set[str] = set()
        self.removed: list[str] = []

    def recycle(self, finished: dict[str, tuple[str, Limits]]) -> set[str]:
        for name, (spare, _) in finished.items():
            self.there.remove(name)
            self.there.add(spare)
        return set(finished)

    def make_spare(self, name: str) -> bool:
        self.there.add(name)
        return True

    def uncharged(self, name: str) -> bool:
        return True

    def release(self, name: str, force: bool = False, memory: bool = True) -> bool:
        self.there.discard(name)
        self.removed.append(name)
        return True


async def test_a_recycled_cgroup_goes_to_the_next_launch_with_its_limits_and_at_close() -> None:
    fake = _Recycling()
    upkeep = cgroup_upkeep.Upkeep(fake, "drfmesos/s", log=None)  # type: ignore[arg-type]
    mine, other = Limits(cpus=0.5, mem_mb=128), Limits(cpus=1.0, mem_mb=256)
    assert upkeep.spare(mine) is None  # (the first launch: spares are made from now)
    fake.there.add("drfmesos/s/fw.a")
    upkeep.limits["drfmesos/s/fw.a"] = mine
    upkeep.add("drfmesos/s/fw.a")
    # (done when nothing is due or in its thread: the fake's files change in the thread,
    # a moment before the upkeep hears back what it recycled)
    await eventually(lambda: len(upkeep) == 0)
    assert "drfmesos/s/fw.a" not in fake.there
    recycled = upkeep.spare(mine)
    assert recycled is not None
    assert recycled[1] == mine  # the launch writes no limit
    fresh = upkeep.spare(other)
    assert fresh is not None
    assert fresh[1] is None  # a new one: all its limits are written
    await upkeep.close()
    assert fake.there == {recycled[0], fresh[0]}  # (taken: theirs to remove as tasks end)
    assert not fake.removed or all(cgroup_upkeep.is_spare(p) for p in fake.removed)
