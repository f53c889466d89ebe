"""The slave's sandbox garbage collector (slave.sandbox_gc): its policy, as properties, and
its shell on a real work dir in this process (a tenant's symlinks out of its sandbox
never followed, nesting deeper than the descriptors it holds, a slave restarted)."""

from __future__ import annotations

import asyncio
import contextlib
import gc as pygc
import os
import subprocess
import threading
import time
from collections import ChainMap
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from protocol import logs
from protocol.transport.aio import cancel_and_wait
from protocol.wire.messages import ReadFile, TaskState
from protocol.wire.resources import Resources
from slave import sandbox_gc
from slave.files import read_sandbox_file
from slave.sandbox_gc import MAX_DEPTH, TRASH, Sandbox, SandboxGC, age_kept, plan
from slave.task_groups import TaskGroups

from harness.helpers import eventually, longest_step

NOW = 1_000_000.0
WEEK = 7 * 24 * 3600.0

frameworks = st.sampled_from(["f1", "f2", "f3"])
names = st.sampled_from(["a", "b", "c", "executor-e", "%executor-x"])
sandboxes = st.lists(
    st.builds(Sandbox, frameworks, names, st.floats(NOW - 2 * WEEK, NOW)),
    unique_by=lambda s: (s.framework_id, s.name),
)
keys = st.sets(st.tuples(frameworks, names))
fractions = st.floats(0, 1)


@settings(max_examples=300, deadline=None)
@given(sandboxes, keys, st.floats(0, 2 * WEEK))
def test_the_plan_removes_exactly_the_ended_sandboxes_older_than_the_age_kept(
    found: list[Sandbox], live: set[tuple[str, str]], kept: float
) -> None:
    p = plan(found, [], live, kept, NOW)
    due = {(s.framework_id, s.name) for s in p.due}
    assert not due & live  # never a live task's or executor's
    assert all(NOW - s.ended >= kept for s in p.due)  # nothing younger than the age kept
    # and every ended one that old goes
    assert due == {
        (s.framework_id, s.name)
        for s in found
        if (s.framework_id, s.name) not in live and NOW - s.ended >= kept
    }
    kept_ones = [s for s in found if (s.framework_id, s.name) not in live | due]
    assert p.next_at == min((NOW + kept - (NOW - s.ended) for s in kept_ones), default=None)
    assert p.next_at is None or p.next_at >= NOW


@given(st.floats(0, 10 * WEEK), fractions, fractions, fractions)
def test_the_age_kept_shrinks_as_the_disk_fills(
    delay: float, headroom: float, used: float, more: float
) -> None:
    fuller = min(1.0, used + more)
    kept = age_kept(delay, headroom, used)
    assert 0 <= age_kept(delay, headroom, fuller) <= kept <= delay
    assert age_kept(delay, headroom, 1 - headroom) == 0  # (1 - headroom full: all go)
    assert age_kept(delay, 0.0, 0.0) == delay


@given(st.lists(frameworks, unique=True), keys)
def test_a_frameworks_empty_directory_goes_once_nothing_of_its_is_live(
    empty: list[str], live: set[tuple[str, str]]
) -> None:
    p = plan([], empty, live, 0.0, NOW)
    assert set(p.empty) == set(empty) - {f for f, _ in live}


@given(sandboxes, keys, keys, st.floats(0, 2 * WEEK))
def test_a_run_dir_goes_only_with_its_sandbox_or_after_it_and_never_while_live(
    found: list[Sandbox], live: set[tuple[str, str]], runs: set[tuple[str, str]], kept: float
) -> None:
    p = plan(found, [], live, kept, NOW, runs)
    due = {(s.framework_id, s.name) for s in p.due}
    present = {(s.framework_id, s.name) for s in found}
    assert set(p.runs) == {key for key in runs - live if key in due or key not in present}


# -- the shell, on real files ------------------------------------------------------------------
def record(
    executor_id: str | None = None, group: tuple[str, str] | None = None, task_id: str = "t"
) -> Any:
    """A TaskRecord as the collector reads it: its TaskInfo names a custom executor
    (`executor_id`), or its task group's executor, which the slave plays, is its
    `executor_key` (`group`), or neither (a command task)."""
    executor = None if executor_id is None else SimpleNamespace(executor_id=executor_id)
    info = SimpleNamespace(executor=executor, task_id=task_id)
    return SimpleNamespace(info=info, executor_key=group)


def make_sandbox(work: Path, framework: str, name: str, ended_ago: float) -> Path:
    sandbox = work / "sandboxes" / framework / name
    (sandbox / "tmp" / "deep").mkdir(parents=True)
    (sandbox / "stdout").write_text("output\n")
    (sandbox / "tmp" / "deep" / "file").write_bytes(b"x" * 10_000)
    return ended(sandbox, ended_ago)


def ended(sandbox: Path, ago: float) -> Path:
    """`sandbox` as of a task that ended `ago` seconds ago (its mtime)."""
    then = time.time() - ago
    os.utime(sandbox, (then, then))
    return sandbox


def collector(
    work: Path,
    tasks: dict[tuple[str, str], Any] | None = None,
    executors: dict[tuple[str, str], Any] | None = None,
    delay: float = 100.0,
    headroom: float = 0.0,
) -> SandboxGC:
    gc = SandboxGC(work, delay, 60.0, headroom, tasks or {}, executors or {}, logs.get("test"))
    return gc


async def test_ended_sandboxes_go_after_the_delay_and_live_ones_stay(tmp_path: Path) -> None:
    old = make_sandbox(tmp_path, "f1", "old", 200)
    young = make_sandbox(tmp_path, "f1", "young", 10)
    running = make_sandbox(tmp_path, "f1", "running", 10_000)  # (a long-running task)
    custom = make_sandbox(tmp_path, "f1", "executor-e1", 10_000)  # a live executor's
    starting = make_sandbox(tmp_path, "f2", "executor-e2", 10_000)  # a live task names it
    gone = make_sandbox(tmp_path, "f3", "t", 10_000)  # its framework's last
    tasks = {("f1", "running"): record(), ("f2", "t2"): record("e2")}
    gc = collector(tmp_path, tasks, {("f1", "e1"): object()})
    await gc.once()
    assert not old.exists()
    assert not gone.exists()
    assert young.exists()
    assert running.exists()
    assert custom.exists()
    assert starting.exists()
    assert not gone.parent.exists()  # f3's directory: empty, nothing of its live
    assert list((tmp_path / "sandboxes" / TRASH).iterdir()) == []
    assert gc.removed == 2


async def test_a_tenants_symlinks_out_of_its_sandbox_are_never_followed(tmp_path: Path) -> None:
    """A task's symlinks to a file, a directory and a persistent volume outside its
    sandbox, and one its sandbox's `tmp` was swapped for: the links go, what they name
    stays, every byte of it."""
    secret = tmp_path / "secret"
    secret.write_text("the slave's\n")
    volume = tmp_path / "volumes" / "roles" / "team" / "db"
    volume.mkdir(parents=True)
    (volume / "data").write_text("kept\n")
    other = make_sandbox(tmp_path, "f2", "other", 1)  # another tenant's, young
    sandbox = make_sandbox(tmp_path, "f1", "t", 1_000)
    (sandbox / "to-secret").symlink_to(secret)
    (sandbox / "to-volume").symlink_to(volume)
    (sandbox / "to-other").symlink_to(other)
    (sandbox / "tmp" / "deep" / "up").symlink_to(tmp_path)
    ended(sandbox, 1_000)
    await collector(tmp_path).once()
    assert not sandbox.exists()
    assert secret.read_text() == "the slave's\n"
    assert (volume / "data").read_text() == "kept\n"
    assert (other / "stdout").read_text() == "output\n"
    assert (other / "tmp" / "deep" / "file").stat().st_size == 10_000


async def test_a_sandbox_nested_deeper_than_the_descriptors_held_goes(tmp_path: Path) -> None:
    sandbox = make_sandbox(tmp_path, "f1", "t", 1_000)
    fd = os.open(sandbox, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(5 * MAX_DEPTH):  # (by descriptor: the path outgrows PATH_MAX)
        os.mkdir("d" * 200, dir_fd=fd)
        child = os.open("d" * 200, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)
    ended(sandbox, 1_000)
    await collector(tmp_path).once()
    assert not sandbox.exists()
    assert list((tmp_path / "sandboxes" / TRASH).iterdir()) == []


async def test_the_disk_filling_shortens_the_age_kept(tmp_path: Path) -> None:
    """At a headroom of 1 the age kept is nothing, whatever the disk: every ended
    sandbox goes, the youngest too; a live one still stays."""
    young = make_sandbox(tmp_path, "f1", "young", 1)
    running = make_sandbox(tmp_path, "f1", "running", 1)
    gc = collector(tmp_path, {("f1", "running"): record()}, delay=WEEK, headroom=1.0)
    await gc.once()
    assert gc.kept == 0
    assert not young.exists()
    assert running.exists()


async def test_a_task_seen_ending_is_kept_its_delay_from_its_end_across_a_restart(
    tmp_path: Path,
) -> None:
    """A task that ran longer than the delay is kept the delay from its end, not from
    its sandbox's making: the end the shell saw is set as the sandbox's mtime, which a
    restarted slave's collector reads."""
    sandbox = make_sandbox(tmp_path, "f1", "long", 1_000)  # made 1,000 s ago
    tasks: dict[tuple[str, str], Any] = {("f1", "long"): record()}
    gc = collector(tmp_path, tasks)
    await gc.once()
    del tasks[("f1", "long")]  # it ends
    await gc.once()  # (it ended now: kept)
    assert sandbox.exists()
    await gc.once()  # (the end set on disk)
    assert time.time() - sandbox.stat().st_mtime < 60
    await collector(tmp_path).once()  # a restarted slave, which did not recover it
    assert sandbox.exists()
    await collector(tmp_path, delay=0.0).once()
    assert not sandbox.exists()


async def test_reading_a_removed_sandboxs_file_says_there_is_none(tmp_path: Path) -> None:
    sandbox = make_sandbox(tmp_path, "f1", "t", 1_000)
    ask = ReadFile(request_id="r", framework_id="f1", task_id="t", name="stdout")
    assert (await read_sandbox_file(tmp_path / "sandboxes", "s1", ask)).data == b"output\n"
    await collector(tmp_path).once()
    answer = await read_sandbox_file(tmp_path / "sandboxes", "s1", ask)
    assert answer.data == b""
    assert answer.error == "no stdout for task t of framework f1 here"
    assert not sandbox.exists()


async def test_a_launch_waits_while_its_framework_is_being_renamed_away(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task id used again as its old sandbox goes: its launch waits (`claimed`) until
    the old one is out of its way, then finds its path free."""
    sandbox = make_sandbox(tmp_path, "f1", "t", 1_000)
    gc = collector(tmp_path)
    gate = threading.Event()  # (the thread's renames held until the launch waits)
    take = gc._take
    monkeypatch.setattr(gc, "_take", lambda *args: gate.wait(10) and take(*args))
    collecting = asyncio.ensure_future(gc.once())
    await eventually(lambda: "f1" in gc._claimed)
    launch = asyncio.ensure_future(gc.claimed("f1"))
    other = asyncio.ensure_future(gc.claimed("f2"))  # (another framework's: no wait)
    await other
    assert not launch.done()
    gate.set()
    await launch
    assert not sandbox.exists()
    sandbox.mkdir(parents=True)  # the new task's (its framework's directory went)
    await collecting
    assert sandbox.exists()


async def test_thousands_of_sandboxes_go_off_the_loop(tmp_path: Path) -> None:
    """2,000 ended sandboxes of 3 entries each: removed by one look, the event loop never
    held up long by one step (the plan: the walk, the renames, the removal and their log
    lines are in a thread). (10,000 on the 2-core test machine: docs/how-to/isolation.md.)"""
    sandboxes = tmp_path / "sandboxes"
    old = time.time() - 1_000
    for f in range(4):
        os.makedirs(sandboxes / f"f{f}")
        for t in range(500):
            sandbox = f"{sandboxes}/f{f}/t{t}"
            os.mkdir(sandbox)
            os.mkdir(f"{sandbox}/tmp")
            for name in ("stdout", "stderr"):
                os.close(os.open(f"{sandbox}/{name}", os.O_CREAT | os.O_WRONLY))
            os.utime(sandbox, (old, old))
    gc = collector(tmp_path)
    collecting = pygc.isenabled()
    pygc.disable()  # (a generation-2 collection, the process's, may fall in any step)
    try:
        with longest_step() as longest:
            await gc.once()
    finally:
        if collecting:
            pygc.enable()
    assert gc.removed == 2_000
    assert os.listdir(sandboxes) == [TRASH]
    assert os.listdir(sandboxes / TRASH) == []
    assert longest[0] < 0.05, longest[0]  # (the plan of 2,000: 2 ms; on a loaded machine)


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Path]:
    """An ended sandbox with a tmpfs mounted in its `tmp/data` (a file `kept` in it)
    until the test unmounts it: the mount point."""
    sandbox = make_sandbox(tmp_path, "f1", "t", 1_000)
    mount = sandbox / "tmp" / "data"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "none", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.decode().strip()}")
    try:
        (mount / "kept").write_text("kept\n")
        ended(sandbox, 1_000)
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


async def test_a_sandbox_with_a_mount_under_it_is_left_alone(tmp_path: Path, mounted: Path) -> None:
    """Something mounted in a sandbox in the slave's namespace (a volume bound there by
    hand, say): the sandbox stays, and so does every file of the mount; unmounted, it
    goes."""
    gc = collector(tmp_path)
    await gc.once()
    assert (mounted / "kept").read_text() == "kept\n"
    sandbox = mounted.parent.parent
    assert (sandbox / "stdout").exists()
    assert gc.removed == 0
    await asyncio.to_thread(subprocess.run, ["umount", str(mounted)], check=True)
    await gc.once()
    assert not sandbox.exists()


async def test_a_look_that_fails_is_said_and_the_next_one_made(tmp_path: Path) -> None:
    """A look that raises (sandboxes/ unreadable a moment): collecting goes on at the
    next look; it used to end the collector's loop for good, in silence (review92)."""
    old = make_sandbox(tmp_path, "f1", "old", 200)
    gc = SandboxGC(tmp_path, 100.0, 0.01, 0.0, {}, {}, logs.get("test"))
    real, failed = gc._look, [False]

    def failing_once() -> Any:
        if not failed[0]:
            failed[0] = True
            raise OSError(5, "Input/output error")
        return real()

    gc._look = failing_once  # type: ignore[method-assign]
    with capture_logs() as said:
        collecting = asyncio.create_task(gc.run())
        try:
            await eventually(lambda: not old.exists())
        finally:
            await cancel_and_wait(collecting)
    assert any(e["event"] == "sandbox_gc.look_failed" for e in said)


def test_a_sandbox_gone_between_listing_and_stat_leaves_the_others_read(tmp_path: Path) -> None:
    """One name gone between the listing and its stat is left out, not its framework's
    whole directory (whose ends seen would then be forgotten: review92)."""
    make_sandbox(tmp_path, "f1", "b", 10)

    class Gone:
        name = "a"

        def stat(self, follow_symlinks: bool = True) -> os.stat_result:
            raise FileNotFoundError(2, "No such file or directory")

    real = os.scandir

    def listing(fd: int) -> Any:
        return contextlib.nullcontext([Gone(), *real(fd)])

    fd = os.open(tmp_path / "sandboxes" / "f1", os.O_RDONLY | os.O_DIRECTORY)
    try:
        with mock.patch.object(sandbox_gc.os, "scandir", listing):
            found = sandbox_gc._mtimes(fd)
    finally:
        os.close(fd)
    assert set(found) == {"b"}


# -- run dirs, and a custom executor's tasks -----------------------------------------------
def make_run_dir(work: Path, framework: str, task_id: str) -> Path:
    """`runs/<framework>/<task>` as an image task leaves it (slave.runners.new_run_dir)."""
    run_dir = work / "runs" / framework / task_id
    run_dir.mkdir(parents=True, mode=0o700)
    (run_dir / "exit_status").write_text("0\n")
    (run_dir / "env").write_text("SECRET=x\n")
    return run_dir


async def test_an_ended_tasks_run_dir_goes_with_its_sandbox_and_no_earlier(tmp_path: Path) -> None:
    """The slave's `runs/<framework>/<task>` of an ended task goes when its sandbox goes
    (it piled up for good: a tenant's short tasks filled the work dir's inodes), not
    while its sandbox is kept or its task lives; one whose sandbox is gone already (a
    slave's before this) goes too; a framework's emptied directory in `runs/` goes."""
    secret = tmp_path / "secret"
    secret.write_text("the slave's\n")
    make_sandbox(tmp_path, "f1", "old", 200)
    old = make_run_dir(tmp_path, "f1", "old")
    (old / "to-secret").symlink_to(secret)
    (old / "to-work").symlink_to(tmp_path)
    make_sandbox(tmp_path, "f1", "young", 10)
    young = make_run_dir(tmp_path, "f1", "young")
    running = make_run_dir(tmp_path, "f1", "running")  # (its sandbox not made yet)
    make_sandbox(tmp_path, "f2", "%executor-x", 200)  # task `executor-x`'s
    escaped = make_run_dir(tmp_path, "f2", "executor-x")
    orphan = make_run_dir(tmp_path, "f3", "t")  # its sandbox gone by other hands
    gc = collector(tmp_path, {("f1", "running"): record()})
    await gc.once()
    assert not old.exists()
    assert secret.read_text() == "the slave's\n"
    assert (tmp_path / "sandboxes").is_dir()
    assert young.exists()
    assert running.exists()
    assert not escaped.exists()
    assert not escaped.parent.exists()  # (f2's runs/ directory: emptied, nothing live)
    assert not orphan.parent.exists()
    assert gc.removed == 2  # (sandboxes)
    assert list((tmp_path / "sandboxes" / TRASH).iterdir()) == []


async def test_a_task_sandbox_stays_while_its_custom_executor_lives(tmp_path: Path) -> None:
    """A task ended, its custom executor still running (other tasks): the task's sandbox
    stays as its executor's does (in Mesos it lies in the executor's run, and goes with
    it), and is kept the delay from the later of the two ends."""
    sandbox = make_sandbox(tmp_path, "f1", "t1", 1_000)
    make_run_dir(tmp_path, "f1", "t1")
    tasks: dict[tuple[str, str], Any] = {("f1", "t1"): record("e1")}
    executors: dict[tuple[str, str], Any] = {("f1", "e1"): object()}
    gc = collector(tmp_path, tasks, executors, delay=0.0)
    await gc.once()
    del tasks[("f1", "t1")]  # the task ends, and is forgotten; its executor runs on
    await gc.once()
    assert sandbox.exists()
    assert (tmp_path / "runs" / "f1" / "t1").exists()
    gc.delay = 100.0
    del executors[("f1", "e1")]  # the executor ends
    await gc.once()
    assert sandbox.exists()  # (ended now: kept its delay from the executor's end)
    await gc.once()
    assert time.time() - sandbox.stat().st_mtime < 60
    gc.delay = 0.0
    await gc.once()
    assert not sandbox.exists()
    assert not (tmp_path / "runs" / "f1").exists()


async def test_on_a_full_disk_an_ended_task_goes_though_its_executor_lives(
    tmp_path: Path,
) -> None:
    """An ended task's sandbox is kept while its executor lives, but not on a disk past
    1 - headroom full (the age kept 0): a tenant's executor that lives on, fed short
    tasks, each held to its disk only while it runs, would fill the disk with their
    ended sandboxes for the other tenants (review94). The executor's own stays."""
    ended = make_sandbox(tmp_path, "f1", "t1", 1_000)
    own = make_sandbox(tmp_path, "f1", "executor-e1", 1_000)
    tasks: dict[tuple[str, str], Any] = {("f1", "t1"): record("e1")}
    executors: dict[tuple[str, str], Any] = {("f1", "e1"): object()}
    gc = collector(tmp_path, tasks, executors, delay=100.0)
    await gc.once()
    del tasks[("f1", "t1")]  # the task ends, and is forgotten; its executor runs on
    await gc.once()
    assert ended.exists()  # (held: the disk has room)
    gc.headroom = 1.0  # the disk past 1 - headroom full
    await gc.once()
    assert not ended.exists()
    assert own.exists()


async def test_a_group_tasks_sandbox_stays_while_its_group_executor_lives(
    tmp_path: Path,
) -> None:
    """A task of a task group ended, its sibling still running under the group's executor
    (which the slave plays): its sandbox stays as long as that executor lives, as the
    slave gives its collector the groups' executors beside the custom ones, and goes,
    run dir and all, once its sibling has ended and the executor with it. So does that
    of a task no look saw run (started and ended between two: the slave says whose it
    was as it forgets it)."""
    groups = TaskGroups()
    groups.start("f1", "pod", Resources(cpus=0.1), ["t1", "t2", "t3"])
    tasks: dict[tuple[str, str], Any] = {
        ("f1", "t1"): record(group=("f1", "pod")),
        ("f1", "t2"): record(group=("f1", "pod")),
    }
    one, other = make_sandbox(tmp_path, "f1", "t1", 1_000), make_sandbox(tmp_path, "f1", "t2", 0)
    make_run_dir(tmp_path, "f1", "t1")
    custom: dict[tuple[str, str], Any] = {}
    executors = ChainMap[tuple[str, str], Any](custom, groups.executors)  # (as the slave's)
    gc = SandboxGC(tmp_path, 0.0, 60.0, 0.0, tasks, executors, logs.get("test"))
    await gc.once()
    del tasks[("f1", "t1")]  # t1 finishes, and is forgotten; t2 runs on under "pod"
    assert groups.ended("f1", "t1", TaskState.FINISHED).executor is None
    brief = make_sandbox(tmp_path, "f1", "t3", 1_000)  # t3 runs and ends between looks
    gc.forgotten("f1", record(group=("f1", "pod"), task_id="t3"))
    assert groups.ended("f1", "t3", TaskState.FINISHED).executor is None
    await gc.once()
    await gc.once()
    assert one.exists()
    assert brief.exists()
    assert (tmp_path / "runs" / "f1" / "t1").exists()
    del tasks[("f1", "t2")]  # its last task ends: so does the executor
    assert groups.ended("f1", "t2", TaskState.KILLED).executor is not None
    await gc.once()
    await gc.once()
    assert not one.exists()
    assert not other.exists()
    assert not brief.exists()
    assert not (tmp_path / "runs" / "f1").exists()


async def test_a_run_dir_with_a_mount_under_it_is_held_with_its_sandbox(tmp_path: Path) -> None:
    """Something mounted in a task's run dir (a container's left behind): neither it nor
    the task's sandbox goes, nor a byte of the mount; unmounted, both go."""
    sandbox = make_sandbox(tmp_path, "f1", "t", 1_000)
    mount = make_run_dir(tmp_path, "f1", "t") / "rootfs"
    mount.mkdir()
    mounting = ["mount", "-t", "tmpfs", "none", str(mount)]
    done = await asyncio.to_thread(subprocess.run, mounting, capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.decode().strip()}")
    try:
        (mount / "kept").write_text("kept\n")
        gc = collector(tmp_path)
        with capture_logs() as said:
            await gc.once()
        assert (mount / "kept").read_text() == "kept\n"
        assert (sandbox / "stdout").exists()
        assert [e["task_id"] for e in said if e["event"] == "sandbox_gc.mounted"] == ["t"]
    finally:
        await asyncio.to_thread(subprocess.run, ["umount", str(mount)], capture_output=True)
    await gc.once()
    assert not sandbox.exists()
    assert not (tmp_path / "runs" / "f1").exists()
