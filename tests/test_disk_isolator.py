"""The disk watch's measuring and its decision, in process (slave.disk_isolator): what a
sandbox holds on disk, its private /tmp and /var/tmp in it, each look bounded however a
tenant fills it, never through a symlink, never into a persistent volume; and which task
is killed for it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.wire.messages import CommandInfo, Reason, TaskInfo, TaskState
from protocol.wire.resources import Resources
from slave.config import TaskRecord
from slave.confine import PRIVATE_TMP
from slave.disk_isolator import MB, DiskWatch, Measured, disk_limit_mb, measure, verdict
from slave.paths import task_sandbox
from slave.runners import Limit


def write(path: Path, mb: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(int(mb * MB)))


def test_a_sandbox_is_measured_by_its_blocks_its_private_tmp_included(tmp_path: Path) -> None:
    sandbox = tmp_path / "sandbox"
    write(sandbox / "stdout", 1)
    for name in PRIVATE_TMP:  # the task's /tmp and /var/tmp
        write(sandbox / name / "scratch", 2)
    write(sandbox / "a" / "b" / "c" / "deep", 1)
    with open(sandbox / "sparse", "wb") as f:  # 1 GB long, holding no block
        f.truncate(1024 * MB)
    os.link(sandbox / "stdout", sandbox / "stdout.again")  # one file, two names
    measured = measure(sandbox)
    assert measured.whole
    assert 6 * MB <= measured.used < 6 * MB + 64 * 4096  # (directories' blocks)


def test_no_symlink_is_followed(tmp_path: Path) -> None:
    """(A persistent volume is such a link where the task has no namespace, and bound
    in the task's namespace where it has one: never the slave's to count.)"""
    outside = tmp_path / "outside"
    write(outside / "big", 8)
    sandbox = tmp_path / "sandbox"
    write(sandbox / "mine", 1)
    (sandbox / "to-a-dir").symlink_to(outside)
    (sandbox / "to-a-file").symlink_to(outside / "big")
    (sandbox / "loop").symlink_to(".")
    measured = measure(sandbox)
    assert measured.whole
    assert MB <= measured.used < 2 * MB


def test_a_mount_in_the_sandbox_is_not_crossed(tmp_path: Path) -> None:
    sandbox = tmp_path / "sandbox"
    mount = sandbox / "mounted"
    mount.mkdir(parents=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "none", str(mount)]).returncode:
        pytest.skip("no mount here (not root, or no CAP_SYS_ADMIN)")
    try:
        write(mount / "elsewhere", 4)
        assert measure(sandbox).used < MB
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_sandbox_of_many_entries_is_walked_no_further_than_most(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tenant's 5,000 files in 1,000 directories: one look walks `most` entries and
    enters `most_dirs` directories, no more, says it was cut, and leaves no descriptor
    open."""
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    for i in range(1_000):
        (sandbox / f"d{i}").mkdir()
        for j in range(5):
            (sandbox / f"d{i}" / f"f{j}").touch()
    walked, entered = 0, 0
    scandir = os.scandir

    def counted(fd: int) -> Iterator[os.DirEntry[str]]:
        nonlocal entered
        entered += 1

        def each() -> Iterator[os.DirEntry[str]]:
            nonlocal walked
            with scandir(fd) as entries:
                for entry in entries:
                    walked += 1
                    yield entry

        return each()

    monkeypatch.setattr(os, "scandir", counted)
    fds = len(os.listdir("/proc/self/fd"))
    measured = measure(sandbox, most=2_000)
    assert not measured.whole
    assert measured.entries == 2_000
    assert walked == 2_001  # (the one past the bound, which stops it)
    assert "more than 2,000 files and directories" in measured.cut
    assert len(os.listdir("/proc/self/fd")) == fds
    # directories cost more than files (an open, a stat and a listing each): fewer
    entered = 0
    measured = measure(sandbox, most_dirs=100)
    assert not measured.whole
    assert measured.cut == "more than 100 directories"
    assert entered == 101  # (the sandbox, and its first 100)
    assert len(os.listdir("/proc/self/fd")) == fds
    monkeypatch.setattr(os, "scandir", scandir)
    whole = measure(sandbox)
    assert whole.whole
    assert whole.entries == 6_000


def test_directories_deeper_than_the_walk_goes_are_said(tmp_path: Path) -> None:
    sandbox = tmp_path / "sandbox"
    deep = sandbox
    for _ in range(100):
        deep = deep / "d"
    write(deep / "hidden", 2)
    fds = len(os.listdir("/proc/self/fd"))
    measured = measure(sandbox, deepest=64)
    assert not measured.whole
    assert "more than 64 levels deep" in measured.cut
    assert measured.used < MB
    assert len(os.listdir("/proc/self/fd")) == fds
    assert measure(sandbox, deepest=128).used > 2 * MB


def test_a_sandbox_that_is_gone_holds_nothing(tmp_path: Path) -> None:
    assert measure(tmp_path / "never-made") == Measured(0, 0)
    (tmp_path / "a-link").symlink_to(tmp_path)
    assert measure(tmp_path / "a-link") == Measured(0, 0)


def test_a_sandbox_whose_listing_fails_leaves_no_descriptor_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing that fails at the top (EMFILE, ENOMEM) is the look's error, and the
    sandbox's descriptor is closed: it was left open, one more at each look."""
    (tmp_path / "sandbox").mkdir()
    opened: list[int] = []
    closed: list[int] = []
    real_open, real_close = os.open, os.close

    def spy_open(*args: Any, **kwargs: Any) -> int:
        opened.append(fd := real_open(*args, **kwargs))
        return fd

    def spy_close(fd: int) -> None:
        closed.append(fd)
        real_close(fd)

    def refuse(_fd: Any) -> Any:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(os, "open", spy_open)
    monkeypatch.setattr(os, "close", spy_close)
    monkeypatch.setattr(os, "scandir", refuse)
    with pytest.raises(OSError, match="Too many open files"):
        measure(tmp_path / "sandbox")
    monkeypatch.undo()
    assert len(opened) == 1
    assert closed == opened


def test_a_tasks_disk_is_its_disk_but_its_volumes() -> None:
    assert disk_limit_mb(Resources(cpus=1, mem=64)) is None
    assert disk_limit_mb(Resources(cpus=1, disk=0)) is None
    assert disk_limit_mb(Resources(disk=100)) == 100
    with_volume = Resources({"disk": 5, "disk(team-a)": 10, "disk(team-a,alice)[v1:data]": 50})
    assert disk_limit_mb(with_volume) == 15


MEASURED = st.builds(
    Measured,
    used=st.integers(min_value=0, max_value=2**44),
    entries=st.integers(min_value=0, max_value=10**6),
    whole=st.booleans(),
    cut=st.just("more than 10 files and directories"),
)
LIMITS = st.none() | st.floats(min_value=0.001, max_value=2**24, allow_nan=False)


@given(MEASURED, LIMITS, st.booleans())
def test_a_task_is_killed_only_where_enforced_over_its_disk_or_unmeasured(
    measured: Measured, limit: float | None, enforce: bool
) -> None:
    why = verdict(measured, limit, enforce)
    if not enforce or limit is None:
        assert why is None
        return
    over = measured.used > limit * MB
    assert (why is not None) == (over or not measured.whole)
    if why is not None:
        assert f"{limit:g} MB" in why
        assert f"{measured.used / MB:.1f} MB" in why
        assert ("over the" in why) == over


class Log:
    """The slave's log: its warnings kept."""

    def __init__(self) -> None:
        self.warnings: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.warnings.append((event, fields))


class Stub:
    """A running task's runner: its kills recorded."""

    def __init__(self, task: TaskInfo) -> None:
        self.task, self.pid, self.container = task, 12345, None
        self.kills: list[Limit | None] = []

    async def kill(self, grace: float, limit: Limit | None = None, **_: Any) -> None:
        self.kills.append(limit)


def running(work: Path, task_id: str, resources: Resources, wrote_mb: float) -> TaskRecord:
    task = TaskInfo(
        task_id=task_id, slave_id="s1", resources=resources, command=CommandInfo(value="true")
    )
    record = TaskRecord("fw", task, TaskState.RUNNING, principal="alice")
    record.runner = Stub(task)  # type: ignore[assignment]
    write(task_sandbox(work, "fw", task_id) / "tmp" / "out", wrote_mb)
    return record


@pytest.mark.parametrize("enforce", [True, False])
async def test_a_look_kills_the_task_over_its_disk_where_enforced(
    tmp_path: Path, enforce: bool
) -> None:
    tasks = {
        ("fw", "over"): running(tmp_path, "over", Resources(cpus=0.1, disk=2), 3),
        ("fw", "within"): running(tmp_path, "within", Resources(cpus=0.1, disk=8), 3),
        ("fw", "no-disk"): running(tmp_path, "no-disk", Resources(cpus=0.1), 3),
    }
    log = Log()
    watch = DiskWatch(tasks, tmp_path, 15.0, enforce, log)
    await watch.look()
    assert set(watch.used) == set(tasks)
    assert all(used >= 3 * MB for used in watch.used.values())
    kills = {key[1]: r.runner.kills for key, r in tasks.items()}  # type: ignore[union-attr]
    if not enforce:
        assert kills == {"over": [], "within": [], "no-disk": []}
        return
    assert kills["within"] == kills["no-disk"] == []
    (limit,) = kills["over"]
    assert limit is not None
    assert (limit.state, limit.reason, limit.hard) == (TaskState.FAILED, Reason.DISK_LIMIT, True)
    assert "over the 2 MB the task asked for" in limit.message
    assert [e for e, _ in log.warnings] == ["task.disk_limit"]
    await watch.look()  # (still dying: killed once)
    assert len(kills["over"]) == 1
    assert [e for e, _ in log.warnings] == ["task.disk_limit"]


async def test_a_sandbox_the_look_cannot_read_is_said_and_the_watch_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = {("fw", "t"): running(tmp_path, "t", Resources(cpus=0.1, disk=2), 3)}
    log = Log()
    watch = DiskWatch(tasks, tmp_path, 15.0, True, log)

    def unreadable(*_: object) -> Measured:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("slave.disk_isolator.measure", unreadable)
    await watch.look()
    assert [e for e, _ in log.warnings] == ["task.disk_unread"]
    assert tasks["fw", "t"].runner.kills == []  # type: ignore[union-attr]
    monkeypatch.undo()
    await watch.look()
    assert len(tasks["fw", "t"].runner.kills) == 1  # type: ignore[union-attr]
