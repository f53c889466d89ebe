"""A hostile tenant against the sandbox collector's run dirs and its custom executors'
tasks (attack94), on a real work dir in this process.

The collector now also takes a task's run dir (`runs/<framework>/<task>`) with its
sandbox, and keeps an ended task's sandbox while the custom executor it ran under lives.
Held: task ids shaped as executor sandboxes' names or as escaped ones take only their
own run dirs, never a live task's, a live executor's or another tenant's of the same
task id; what lies in a run dir or a sandbox (hard links to another tenant's files, a
symlink where a run dir or a framework's directory is, a deep nest, a closed directory)
goes without a byte of what it names. Found (strict xfails): a custom executor's task
that starts and ends between two looks is never seen, and its sandbox goes while its
executor lives; a launch waits for every tenant's renames of a look, not only its own
framework's; a directory whose listing outlasts a step of emptying is never emptied,
nor anything listed after it in the trash, and the collector spins on it.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from protocol import logs
from protocol.transport.aio import within
from slave import sandbox_gc
from slave.sandbox_gc import TRASH, SandboxGC

from harness.helpers import eventually


def fake_task(task_id: str, executor_id: str) -> Any:
    """A TaskRecord of a task that ran under a custom executor, as the slave forgets it."""
    info = SimpleNamespace(task_id=task_id, executor=SimpleNamespace(executor_id=executor_id))
    return SimpleNamespace(info=info, executor_key=None)


def record(executor_id: str | None = None) -> Any:
    executor = None if executor_id is None else SimpleNamespace(executor_id=executor_id)
    return SimpleNamespace(info=SimpleNamespace(executor=executor), executor_key=None)


def sandbox(work: Path, framework: str, name: str, ended_ago: float) -> Path:
    path = work / "sandboxes" / framework / name
    (path / "tmp").mkdir(parents=True)
    (path / "stdout").write_text(f"{framework}/{name}\n")
    then = time.time() - ended_ago
    os.utime(path, (then, then))
    return path


def run_dir(work: Path, framework: str, task_id: str) -> Path:
    """`runs/<framework>/<task>` as an image task leaves it."""
    path = work / "runs" / framework / task_id
    path.mkdir(parents=True, mode=0o700)
    (path / "exit_status").write_text("0\n")
    (path / "env").write_text(f"SECRET={framework}/{task_id}\n")
    return path


def collector(
    work: Path,
    tasks: dict[tuple[str, str], Any] | None = None,
    executors: dict[tuple[str, str], Any] | None = None,
    delay: float = 100.0,
) -> SandboxGC:
    return SandboxGC(work, delay, 60.0, 0.0, tasks or {}, executors or {}, logs.get("test"))


async def test_task_ids_shaped_as_executor_or_escaped_names_take_only_their_own_run_dirs(
    tmp_path: Path,
) -> None:
    """Task ids chosen to read as executor sandboxes' names (`executor-e1`, the name of
    the live executor e1's sandbox) or as escaped ones (`%x`, beside a live task `x`, and
    `%executor-e1`, live): each ended one's run dir goes with its sandbox, and nothing
    of the live task, the live executor or the other tenant's task of the same id."""
    ours = "mallory"
    e1 = sandbox(tmp_path, ours, "executor-e1", 1_000)  # a live executor's
    sandbox(tmp_path, ours, "%executor-e1", 1_000)  # task `executor-e1`, ended
    ended_shaped = run_dir(tmp_path, ours, "executor-e1")
    sandbox(tmp_path, ours, "%%x", 1_000)  # task `%x`, ended
    ended_escaped = run_dir(tmp_path, ours, "%x")
    live_x = run_dir(tmp_path, ours, "x")  # task `x`, live, its sandbox not made yet
    live_escaped = run_dir(tmp_path, ours, "%executor-e1")  # task `%executor-e1`, live
    # alice's task of the same ids: one live, one ended a moment ago
    alice_live = run_dir(tmp_path, "alice", "executor-e1")
    alice_young = sandbox(tmp_path, "alice", "%%x", 1)
    alice_young_run = run_dir(tmp_path, "alice", "%x")
    tasks = {
        (ours, "x"): record(),
        (ours, "%executor-e1"): record(),
        ("alice", "executor-e1"): record(),
    }
    gc = collector(tmp_path, tasks, {(ours, "e1"): object()})
    await gc.once()
    assert not ended_shaped.exists()
    assert not ended_escaped.exists()
    assert (e1 / "stdout").read_text() == "mallory/executor-e1\n"
    assert (live_x / "env").read_text() == "SECRET=mallory/x\n"
    assert (live_escaped / "env").read_text() == "SECRET=mallory/%executor-e1\n"
    assert (alice_live / "env").read_text() == "SECRET=alice/executor-e1\n"
    assert (alice_young / "stdout").read_text() == "alice/%%x\n"
    assert (alice_young_run / "env").read_text() == "SECRET=alice/%x\n"
    assert gc.removed == 2


async def test_what_lies_in_a_run_dir_or_sandbox_goes_without_what_it_names(
    tmp_path: Path,
) -> None:
    """Hard links to another tenant's file and to the slave's, a symlink where a task's
    run dir, or a framework's directory in `runs/`, would be (pointing at another
    tenant's), a closed directory and a nest 200 deep: all of it goes, and every byte
    of what it named stays, its link count back as it was."""
    theirs = run_dir(tmp_path, "alice", "a1")  # alice's live task's
    their_sandbox = sandbox(tmp_path, "alice", "a1", 1)
    slaves = tmp_path / "journal"
    slaves.write_text("the slave's\n")
    ours = run_dir(tmp_path, "mallory", "t1")
    os.link(theirs / "env", ours / "their-env")
    os.link(slaves, ours / "journal")
    mine = sandbox(tmp_path, "mallory", "t1", 1_000)
    os.link(their_sandbox / "stdout", mine / "their-stdout")
    os.link(slaves, mine / "journal")
    (mine / "closed" / "inner").mkdir(parents=True)
    (mine / "closed" / "inner" / "f").write_text("x")
    os.chmod(mine / "closed" / "inner", 0)
    os.chmod(mine / "closed", 0)
    fd = os.open(ours, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(200):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.symlink(theirs / "env", "to-their-env", dir_fd=fd)
    os.close(fd)
    (tmp_path / "runs" / "mallory" / "t2").symlink_to(theirs)  # (no sandbox, no task)
    (tmp_path / "runs" / "mallory" / "t3").write_text("a file, not a run dir\n")
    (tmp_path / "runs" / "fodd").symlink_to(tmp_path / "runs" / "alice")
    then = time.time() - 1_000
    os.utime(mine, (then, then))
    gc = collector(tmp_path, {("alice", "a1"): record()})
    await gc.once()
    assert not mine.exists()
    assert not (tmp_path / "runs" / "mallory").exists()
    assert (theirs / "env").read_text() == "SECRET=alice/a1\n"
    assert (theirs / "env").stat().st_nlink == 1
    assert (theirs / "exit_status").read_text() == "0\n"
    assert (their_sandbox / "stdout").read_text() == "alice/a1\n"
    assert (their_sandbox / "stdout").stat().st_nlink == 1
    assert slaves.read_text() == "the slave's\n"
    assert slaves.stat().st_nlink == 1
    assert (tmp_path / "runs" / "fodd").is_symlink()  # (not a directory: never entered)
    assert list((tmp_path / "sandboxes" / TRASH).iterdir()) == []


async def test_an_executors_task_that_ran_between_two_looks_stays_while_it_lives(
    tmp_path: Path,
) -> None:
    """The collector learned which executor a task ran under only from the slave's
    tasks at a look (every --disk-watch-interval, 60 s by default): a task forgotten
    by then (it ended, its end sent) was never seen, and its sandbox was timed from its
    mtime as any other -- with a delay of 10 s, a task of 20 s ago went while its
    executor e1 lived on. The slave tells it now as it forgets one (`forgotten`)."""
    executors: dict[tuple[str, str], Any] = {("f1", "e1"): object()}
    gc = collector(tmp_path, {}, executors, delay=10.0)
    await gc.once()  # (a look: e1 runs, no task yet)
    # t1 runs on e1, ends and is forgotten before the next look, as the slave does it
    gc.forgotten("f1", fake_task("t1", "e1"))
    quick = sandbox(tmp_path, "f1", "t1", 20)
    executor = sandbox(tmp_path, "f1", "executor-e1", 1_000)
    await gc.once()
    assert executor.exists()
    assert quick.exists()


async def test_a_launch_waits_for_its_own_frameworks_renames_not_another_tenants(
    tmp_path: Path,
) -> None:
    """Mallory's many ended sandboxes and alice's one fall due at the same look. Alice's
    launch waited (`claimed`) until the look's renames were done: all of them, mallory's
    too (measured: 20,000 of mallory's ended sandboxes with their run dirs held alice's
    launch 1.1-6.1 s on the 2-core test machine at a load average of 7-9). Now the
    renames go a framework's at a time, CHUNK a hop, one a launch waits for first: here
    mallory's (first in line, its first rename held until alice's launch waits) hold
    alice's launch one hop of theirs at most."""
    many = 4 * sandbox_gc.CHUNK
    for i in range(many):
        sandbox(tmp_path, "a-mallory", f"m{i}", 1_000)  # (first in line by its name)
    sandbox(tmp_path, "alice", "a1", 1_000)
    gc = collector(tmp_path)
    held = threading.Event()
    renamed: list[str] = []
    real = gc._take_one

    def take_one(parent: int, trash: int | None, name: str) -> None:
        if name.startswith("m"):
            held.wait(30)  # (until alice's launch waits)
        renamed.append(name)  # (in the one thread: the order they went in)
        real(parent, trash, name)

    gc._take_one = take_one  # type: ignore[method-assign]
    collecting = asyncio.ensure_future(gc.once())
    try:
        await eventually(lambda: "alice" in gc._claimed)
        launch = asyncio.ensure_future(gc.claimed("alice", ["a1"]))
        await eventually(lambda: "alice" in gc._waiting)
        held.set()
        await within(launch, 30)
    finally:
        held.set()
        await collecting
    # alice's went after one hop of mallory's at most (counted in the order they went:
    # by the time this test runs again, the thread may have renamed more of mallory's)
    assert renamed.index("a1") <= sandbox_gc.CHUNK
    assert len(renamed) == many + 1  # (and mallory's all went in the same look)


async def test_a_directory_whose_listing_outlasts_a_step_is_still_emptied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trash is emptied a step (0.2 s) at a time. Each step listed each directory it
    entered whole, then removed entries while its time lasted: a directory whose listing
    alone outlasted the step had none removed, step after step, look after look, and the
    trash's entries listed after it (other tenants' sandboxes) were never reached, while
    the collector spun on it for a whole interval every look; now each entry goes as it
    is read. Measured on the 2-core
    test machine at a load average of 7-9: a directory of 300,000 empty files (made by a
    tenant's process in 2 minutes, 300,000 inodes, no data) took 0.14-0.21 s to list;
    here a step of a millisecond and 20,000 entries stand for 0.2 s and such a
    directory (with the real step, 20,000 went in two looks; with this one, none in four:
    now some go at every look)."""
    monkeypatch.setattr(sandbox_gc, "STEP", 0.001)
    wide = sandbox(tmp_path, "mallory", "t", 1_000) / "tmp" / "wide"
    wide.mkdir()
    fd = os.open(wide, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(20_000):
            os.mknod(f"{i:x}", dir_fd=fd)
    finally:
        os.close(fd)
    then = time.time() - 1_000
    os.utime(wide.parent.parent, (then, then))
    gc = collector(tmp_path)
    gc.interval = 0.5  # (the trash emptied half a second a look at most)
    trash = tmp_path / "sandboxes" / TRASH
    left: list[int] = []  # entries in the trash after each look
    for _ in range(60):  # (4 looks on a quiet machine: each removes some, however slow)
        await gc.once()
        left.append(sum(len(files) + len(dirs) for _, dirs, files in os.walk(trash)))
        if not left[-1]:
            break
    assert left[-1] == 0, left
    assert all(later < earlier for earlier, later in itertools.pairwise(left)), left
