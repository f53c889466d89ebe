"""Sandboxes removed once their tasks and executors have ended a while: Mesos's agent
garbage collector (`--gc_delay`, `--disk_watch_interval`, `--gc_disk_headroom`).

The policy (pure, `plan`): a sandbox of no live task and no live executor goes once it
ended `age_kept` ago: the slave's `gc_delay` while the disk of its work dir is empty,
shorter as it fills, `gc_delay * max(0, 1 - headroom - used)` (Mesos's own sum), so at a
disk `1 - headroom` full every ended sandbox goes. A framework's directory goes once
empty, with nothing of its live. A live task's sandbox, a live executor's, and the
executor sandbox a live task names are never due; nor is an ended task's while the
executor it ran under lives, a custom one or the task group's the slave plays (in Mesos
it lies in that executor's run): it ends with the later of the two. A task's run dir,
the slave's own `runs/<framework>/<task>` (an image task's environment file and exit
status), goes with its sandbox, never before it nor while its task lives (or at once,
of no live task, its sandbox gone by other hands or by a slave before this one); a
framework's directory there goes once empty, as under `sandboxes/`.

The shell (`SandboxGC`), every `interval` (sooner when a sandbox falls due): one look at
`sandboxes/` and the disk in a thread, the plan on the loop, then in a thread again
each due sandbox renamed into `sandboxes/gc trash/` (one rename: the task id is free
again at once; no framework id holds a space) and that emptied, a little at a time,
for one `interval` a look at most (a process of the tenant's still in a sandbox renamed
there may feed it for ever: the looks go on).
Nothing runs on the event loop but the plan. A sandbox's end is the one the shell saw
(a task or executor it saw live, live no more), kept in memory and set as its
directory's mtime, so a restarted slave keeps each for what is left of its delay (the
ones it did not recover included, as a Mesos agent schedules them anew). The mtime is
the task's user's to set: it is read once, at a sandbox's first sight ended (a restart,
a task that ran between two looks), and never later than then.

What lies in a sandbox is its task's: a removal never follows a symlink (it goes, not
what it names), never enters another file system or a sandbox with anything mounted
under it, and opens each directory from its parent's descriptor, so a part swapped for
a symlink meanwhile is removed, never followed. Persistent volumes live elsewhere
(`volumes/`) and are reached from a sandbox only through such a symlink or a mount: never
touched. A directory nested deeper than MAX_DEPTH is moved up to the top of
the trash and emptied from there, so that no tenant's nesting costs more than
2 * MAX_DEPTH descriptors (each directory held open, and its listing, read as it goes).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import itertools
import os
import stat
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from slave.paths import ESCAPED, EXECUTOR, executor_sandbox_name, task_sandbox_name

Key = tuple[str, str]  # (framework id, the sandbox's name in its framework's directory)
T = TypeVar("T")

TRASH = "gc trash"  # in sandboxes/ (no framework id holds a space): being removed, 0700
MAX_DEPTH = 64  # directories held open at once, at most, while emptying one (2 fds each)
STEP = 0.2  # seconds of removal in one thread hop: another slave's look waits no longer
CHUNK = 256  # renames in one thread hop: a launch waiting on its framework's, no more
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


# -- the policy ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Sandbox:
    framework_id: str
    name: str
    ended: float  # when its task or executor ended (wall clock: its directory's mtime)


@dataclass(frozen=True)
class Plan:
    due: list[Sandbox]  # to go now
    empty: list[str]  # frameworks whose empty directories go
    next_at: float | None  # when the next of those kept falls due, at this age kept
    runs: list[Key] = field(default_factory=list)  # run dirs to go, by their sandbox's key
    runs_empty: list[str] = field(default_factory=list)  # frameworks' empty dirs in runs/


def age_kept(delay: float, headroom: float, used: float) -> float:
    """How long an ended sandbox is kept, the disk `used` (0-1) full: Mesos's
    `gc_delay * max(0, 1 - gc_disk_headroom - usage)`."""
    return delay * max(0.0, 1.0 - headroom - used)


def plan(
    sandboxes: Collection[Sandbox],  # (read twice)
    empty: Iterable[str],
    live: Collection[Key],
    kept: float,
    now: float,
    runs: Iterable[Key] = (),
    runs_empty: Iterable[str] = (),
) -> Plan:
    """What goes now: each sandbox not `live` that ended `kept` ago or more, and the
    `empty` framework directories of frameworks with nothing `live`; of the run dirs
    (`runs`, each by its task's sandbox's key) each not `live` whose sandbox goes now
    or is gone (not in `sandboxes`), and the empty ones of `runs/` (`runs_empty`)."""
    due: list[Sandbox] = []
    next_at: float | None = None
    for s in sandboxes:
        if (s.framework_id, s.name) in live:
            continue
        age = now - s.ended
        if age >= kept:
            due.append(s)
        elif next_at is None or now + kept - age < next_at:
            next_at = now + kept - age
    busy = {framework for framework, _ in live}
    kept_ones = {(s.framework_id, s.name) for s in sandboxes} - {
        (s.framework_id, s.name) for s in due
    }
    return Plan(
        due,
        [f for f in empty if f not in busy],
        next_at,
        [key for key in runs if key not in live and key not in kept_ones],
        [f for f in runs_empty if f not in busy],
    )


def live_sandboxes(
    tasks: Mapping[Key, Any], executors: Collection[Key], ran_under: Mapping[Key, str]
) -> set[Key]:
    """The sandboxes in use: each task's the slave knows (`tasks`: its TaskRecords by
    framework and task id, ended ones not yet forgotten included), the executor's each
    of them names (it may be starting), each live executor's (`executors`: by framework
    and executor id, custom ones and the task groups' the slave plays), and each ended
    task's whose executor lives (`ran_under`: a task's sandbox, its executor's id): as
    in Mesos, where a task's sandbox lies in its executor's run and goes with it."""
    live = {(f, executor_sandbox_name(e)) for f, e in executors}
    for (framework, task_id), record in tasks.items():
        live.add((framework, task_sandbox_name(task_id)))
        if record.info.executor is not None:
            live.add((framework, executor_sandbox_name(record.info.executor.executor_id)))
    live.update(key for key, e in ran_under.items() if (key[0], e) in executors)
    return live


def executor_of(record: Any) -> str | None:
    """The id of the executor a task (a TaskRecord) runs under: the custom executor its
    TaskInfo names, else its task group's, which the slave plays (None: neither)."""
    if record.info.executor is not None:
        return str(record.info.executor.executor_id)
    return None if record.executor_key is None else str(record.executor_key[1])


def sandbox_names(task: Any) -> list[str]:
    """The sandboxes a task (a TaskInfo) uses: its own, and its executor's if it names one."""
    names = [task_sandbox_name(task.task_id)]
    if task.executor is not None:
        names.append(executor_sandbox_name(task.executor.executor_id))
    return names


def owner_of(name: str) -> dict[str, str]:
    """A sandbox's task or executor id, by its name, for a log line."""
    if name.startswith(EXECUTOR):
        return {"executor_id": name[len(EXECUTOR) :]}
    return {"task_id": name[len(ESCAPED) :] if name.startswith(ESCAPED) else name}


# -- the shell -----------------------------------------------------------------------------
_thread: ThreadPoolExecutor | None = None


async def _in_thread(fn: Callable[..., T], *args: Any) -> T:
    """One thread for every slave of the process (a fleet's too), apart from the default
    executor the launches use: a long removal holds up no launch."""
    global _thread
    if _thread is None:
        _thread = ThreadPoolExecutor(1, thread_name_prefix="sandbox-gc")
    return await asyncio.get_running_loop().run_in_executor(_thread, fn, *args)


@dataclass
class Look:
    """One look at `sandboxes/` and the disk (in a thread)."""

    sandboxes: dict[Key, float] = field(default_factory=dict)  # each one's mtime
    empty: list[str] = field(default_factory=list)  # frameworks' empty directories
    mounted: set[Key] = field(default_factory=set)  # sandboxes with a mount under them
    runs: set[Key] = field(default_factory=set)  # run dirs, by their task's sandbox's key
    runs_empty: list[str] = field(default_factory=list)  # frameworks' empty dirs in runs/
    runs_mounted: set[Key] = field(default_factory=set)  # run dirs with a mount under them
    used: float = 0.0  # the work dir's disk, 0-1 full


class SandboxGC:
    """The slave's sandboxes removed as `plan` says, off the event loop (`run`, until
    cancelled). `claimed(framework)`: a launch waits while that framework's sandboxes
    are being renamed away (its task id may be one of them)."""

    def __init__(
        self,
        work_dir: Path,
        delay: float,
        interval: float,
        headroom: float,
        tasks: Mapping[Key, Any],
        executors: Collection[Key],
        log: Any,
    ) -> None:
        self.work_dir, self.delay, self.interval = work_dir, delay, interval
        self.headroom = headroom
        self.tasks, self.executors, self.log = tasks, executors, log
        self.removed = 0  # sandboxes removed since the slave started
        self.kept = delay  # the age kept at the last look
        self._claimed: set[str] = set()  # frameworks whose sandboxes are being renamed
        self._waiting: Counter[str] = Counter()  # of those, launches waiting for each
        # (the rest is made by `run`: a fleet's 100,000 simulated slaves never run it)
        self._released: asyncio.Event
        self._stop: threading.Event
        self._seen: set[Key]  # live at the last look
        self._ran_under: dict[Key, str]  # a task's sandbox: its executor's id (while either lives)
        self._ended: dict[Key, float]  # seen ending: their mtime to set
        self._names: Iterator[int]
        self._logged: set[str]  # what stays in the trash, said once
        self._told_mounted: set[Key]  # sandboxes with a mount, said at the last look
        self._made = False
        self.root: Path
        self.runs: Path
        self.trash: Path

    def _ready(self) -> None:
        if self._made:
            return
        self._made = True
        self.root = self.work_dir / "sandboxes"
        self.runs = self.work_dir / "runs"
        self.trash = self.root / TRASH
        self._released, self._stop = asyncio.Event(), threading.Event()
        self._seen, self._ended, self._logged, self._told_mounted = set(), {}, set(), set()
        self._ran_under = {}
        self._names = itertools.count()

    async def claimed(self, framework_id: str, names: Iterable[str] = ()) -> None:
        """(`names`: the sandboxes the launch uses, whose end, if seen, is forgotten:
        they end anew.)"""
        if framework_id in self._claimed:
            self._waiting[framework_id] += 1  # (its renames first)
            try:
                while framework_id in self._claimed:
                    self._released.clear()
                    await self._released.wait()
            finally:  # (a launch cancelled meanwhile waits no more)
                self._waiting[framework_id] -= 1
                if not self._waiting[framework_id]:
                    del self._waiting[framework_id]
        if self._made:
            for name in names:
                self._ended.pop((framework_id, name), None)

    def forgotten(self, framework_id: str, record: Any) -> None:
        """The slave forgets an ended task (a TaskRecord): which executor it ran under
        kept, its sandbox staying while that lives (a task that ran between two looks
        was never seen under it)."""
        executor_id = executor_of(record)
        if self._made and executor_id is not None:
            key = (framework_id, task_sandbox_name(record.info.task_id))
            self._ran_under[key] = executor_id

    async def run(self) -> None:
        self._ready()
        try:
            while True:
                try:
                    next_at = await self.once()
                except Exception as e:  # (a look that failed: said, and the next one made;
                    # else collecting stopped for good, in silence, until a restart)
                    self.log.warning("sandbox_gc.look_failed", error=repr(e)[:200])
                    next_at = None
                wait = self.interval
                if next_at is not None:
                    wait = min(wait, max(0.0, next_at - time.time()))
                await asyncio.sleep(wait)
        finally:
            self._stop.set()  # (a removal in the thread ends at its next entry)

    async def once(self) -> float | None:
        """One look, and what it found due removed: when the next falls due."""
        self._ready()
        look = await _in_thread(self._look)
        # (from here to the claim, no await: a task launched after this finds its
        # framework claimed and waits)
        now = time.time()
        self.kept = age_kept(self.delay, self.headroom, look.used)
        # an ended task's sandbox kept while its executor lives, but not on a disk past
        # 1 - headroom full: a tenant's executor that lives on, fed short tasks, would
        # fill it (each task held to its disk only while it runs)
        live = self._live(executors_hold=look.used < 1 - self.headroom)
        touch = {key: now for key in self._seen - live}
        self._ended.update(touch)
        self._seen = live
        for key in live:
            self._ended.pop(key, None)  # (a task id used again: ends anew)
        for key in self._ended.keys() - look.sandboxes.keys():
            del self._ended[key]  # (gone by other hands)
        for key, mtime in look.sandboxes.items():  # (the mtime, the task's user's, read
            if key not in live:  # once, never later than now: else an mtime set ahead
                self._ended.setdefault(key, min(mtime, now))  # kept it for good)
        sandboxes = [
            Sandbox(f, n, self._ended.get((f, n), mtime))
            for (f, n), mtime in look.sandboxes.items()
        ]  # (one with a mount, or its run dir with one, is held: as a live one)
        held = live | look.mounted | look.runs_mounted
        p = plan(sandboxes, look.empty, held, self.kept, now, look.runs, look.runs_empty)
        going = {(s.framework_id, s.name) for s in p.due}
        touch = {k: t for k, t in touch.items() if k not in going and k in look.sandboxes}
        mounted = look.mounted | look.runs_mounted
        for key in mounted - self._seen - self._told_mounted:  # (once while it stays)
            self.log.warning("sandbox_gc.mounted", framework_id=key[0], **owner_of(key[1]))
        self._told_mounted = mounted
        may_empty = {s.framework_id for s in p.due} - {f for f, _ in live}
        runs_may_empty = {f for f, _ in p.runs} - {f for f, _ in live}
        try:
            taken = await self._take_all(p, may_empty, runs_may_empty, touch, (now, look.used))
        finally:
            self._claimed = set()
            self._released.set()
        for s in taken:  # (each logged in the thread: 10,000 lines held the loop 0.2 s)
            self._ended.pop((s.framework_id, s.name), None)
        self.removed += len(taken)
        until = time.monotonic() + self.interval  # (a tenant's process in the trash may
        while await _in_thread(self._empty_trash, STEP):  # feed it for ever: it holds up
            if time.monotonic() > until:  # no look, and what is left waits for the next)
                break
        return p.next_at

    async def _take_all(
        self,
        p: Plan,
        may_empty: set[str],
        runs_may_empty: set[str],
        touch: dict[Key, float],
        seen: tuple[float, float],
    ) -> list[Sandbox]:
        """The plan's renames, a framework's at a time and at most CHUNK a thread hop,
        a framework a launch waits for first (of several, the one with the fewest left):
        a launch waits for its own framework's, never for another tenant's thousands.
        Each framework released once its renames are done (and its emptied directories
        gone)."""
        work: dict[str, tuple[list[Sandbox], list[Key]]] = {}
        for s in p.due:
            work.setdefault(s.framework_id, ([], []))[0].append(s)
        for key in p.runs:
            work.setdefault(key[0], ([], []))[1].append(key)
        empty, runs_empty = {*p.empty, *may_empty}, {*p.runs_empty, *runs_may_empty}
        for framework in empty | runs_empty:
            work.setdefault(framework, ([], []))
        self._claimed = set(work)
        taken: list[Sandbox] = []
        if touch:
            await _in_thread(self._take, [], [], set(), touch, seen)
        while work:
            # of the frameworks launches wait for, the one with the fewest renames left:
            # by id, a tenant's thousands with a launch of its own waiting held another's
            waiting = self._waiting.keys() & work.keys()
            framework = (
                min(waiting, key=lambda f: (len(work[f][0]) + len(work[f][1]), f))
                if waiting
                else min(work)
            )
            due, runs = work[framework]
            some, runs_some = due[:CHUNK], runs[: max(0, CHUNK - len(due))]
            del due[: len(some)], runs[: len(runs_some)]
            last = not due and not runs
            taken += await _in_thread(
                self._take_some,
                some,
                [framework] if last and framework in empty else [],
                runs_some,
                [framework] if last and framework in runs_empty else [],
                seen,
            )
            if last:
                del work[framework]
                self._claimed.discard(framework)
                self._released.set()
        return taken

    def _take_some(
        self,
        due: list[Sandbox],
        empty: list[str],
        runs: list[Key],
        runs_empty: list[str],
        seen: tuple[float, float],
    ) -> list[Sandbox]:
        """Some of one framework's renames (in the thread)."""
        taken = self._take(due, empty, set(), {}, seen)
        self._take_runs(runs, runs_empty)
        return taken

    def _live(self, executors_hold: bool = True) -> set[Key]:
        """The sandboxes in use now; which executor each known task ran under kept (an
        ended task's, forgotten by the slave, while its executor lives)."""
        for (framework, task_id), record in self.tasks.items():
            key = (framework, task_sandbox_name(task_id))
            executor_id = executor_of(record)
            if executor_id is None:
                self._ran_under.pop(key, None)  # (a task id used again, on no executor)
            else:
                self._ran_under[key] = executor_id
        live = live_sandboxes(self.tasks, self.executors, self._ran_under if executors_hold else {})
        for key in [k for k in self._ran_under if k not in live]:
            del self._ran_under[key]  # (the task and its executor both ended)
        return live

    # -- in the thread ---------------------------------------------------------------------
    def _look(self) -> Look:
        look = Look()
        try:
            vfs = os.statvfs(self.work_dir)
            look.used = (vfs.f_blocks - vfs.f_bfree) / vfs.f_blocks if vfs.f_blocks else 0.0
        except OSError:
            pass
        for framework, mtimes in _by_framework(self.root, _mtimes):
            if not mtimes:
                look.empty.append(framework)
            look.sandboxes.update(((framework, n), t) for n, t in mtimes.items())
        for framework, names in _by_framework(self.runs, _names):  # (none: no image task yet)
            if not names:
                look.runs_empty.append(framework)
            look.runs.update((framework, task_sandbox_name(n)) for n in names)
        mounted, runs_mounted = _mounted(self.root, self.runs)
        look.mounted = mounted
        look.runs_mounted = {(f, task_sandbox_name(n)) for f, n in runs_mounted}
        return look

    def _take(
        self,
        due: list[Sandbox],
        empty: list[str],
        may_empty: set[str],
        touch: dict[Key, float],
        seen: tuple[float, float],
    ) -> list[Sandbox]:
        """Each due sandbox renamed into the trash (removed in place where the trash is
        on another file system), and logged; empty framework directories removed; ended
        ones' mtime set. What was taken. (`seen`: when, and the disk then.)"""
        taken: list[Sandbox] = []
        try:
            dirs = _Dirs(self.root, self._open_trash if due else None)
        except OSError:
            return taken
        with dirs:
            for (framework, name), at in touch.items():
                with contextlib.suppress(OSError):
                    os.utime(name, (at, at), dir_fd=dirs.of(framework), follow_symlinks=False)
            for s in due:
                ids = {"framework_id": s.framework_id, **owner_of(s.name)}
                try:
                    self._take_one(dirs.of(s.framework_id), dirs.trash, s.name)
                except OSError as e:
                    self.log.warning("sandbox_gc.failed", **ids, error=e.strerror or str(e))
                    continue
                taken.append(s)
                self.log.info(
                    "sandbox_gc.removed",
                    **ids,
                    ended_ago=round(seen[0] - s.ended, 1),
                    age_kept=round(self.kept, 1),
                    disk_used=round(seen[1], 3),
                )
            dirs.remove_empty([*empty, *may_empty])
        return taken

    def _take_runs(self, due: list[Key], empty: list[str]) -> None:
        """Each due run dir renamed into the trash (or removed in place), as a sandbox
        is: the slave's, but what it names is never followed either; then the empty
        framework directories of `runs/` removed."""
        if not due and not empty:
            return
        try:
            dirs = _Dirs(self.runs, self._open_trash if due else None)
        except OSError:
            return
        with dirs:
            for framework, name in due:
                task_id = owner_of(name)["task_id"]
                try:
                    self._take_one(dirs.of(framework), dirs.trash, task_id)
                except OSError as e:
                    self.log.warning(
                        "sandbox_gc.run_dir_failed",
                        framework_id=framework,
                        task_id=task_id,
                        error=e.strerror or str(e),
                    )
            dirs.remove_empty(empty)

    def _take_one(self, parent: int, trash: int | None, name: str) -> None:
        try:
            if trash is None:
                raise OSError(errno.EXDEV, "no trash")
            os.rename(name, self._fresh(), src_dir_fd=parent, dst_dir_fd=trash)
        except FileNotFoundError:
            return
        except OSError as e:
            if e.errno != errno.EXDEV:
                raise
            if not _Removal(parent, os.fstat(parent).st_dev, None, self._stop).remove(name):
                raise OSError(errno.EBUSY, "not all of it could be removed") from None

    def _open_trash(self) -> int | None:
        try:
            os.mkdir(self.trash, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return None
        try:
            fd = os.open(self.trash, _DIR)
        except OSError:
            return None
        return fd

    def _fresh(self) -> str:
        return f"{time.time_ns()}.{next(self._names)}"

    def _empty_trash(self, budget: float) -> bool:
        """Remove what is in the trash for `budget` seconds at most: whether more is left
        to remove now (what cannot be removed is tried again at the next look)."""
        try:
            trash = os.open(self.trash, _DIR)
        except OSError:
            return False
        try:
            removal = _Removal(
                trash, os.fstat(trash).st_dev, time.monotonic() + budget, self._stop, self._fresh
            )
            for name in _names(trash):
                if not removal.remove(name):
                    if removal.out_of_time():
                        return not self._stop.is_set()
                    if name not in self._logged:
                        self._logged.add(name)
                        self.log.warning("sandbox_gc.left", path=f"{self.trash}/{name}")
            return removal.moved_up  # (deep directories moved up: their turn now)
        finally:
            os.close(trash)


class _Dirs:
    """A root (`sandboxes/` or `runs/`) opened for one hop's renames: each framework's
    directory under it opened once, from the root's descriptor, and the trash if asked
    for (`open_trash`); all closed on leaving. OSError if the root cannot be opened."""

    def __init__(self, root: Path, open_trash: Callable[[], int | None] | None) -> None:
        self.root = os.open(root, _DIR)
        self._opened: dict[str, int] = {}
        self.trash = open_trash() if open_trash is not None else None

    def of(self, framework: str) -> int:
        """The framework's directory (OSError if it cannot be opened)."""
        if framework not in self._opened:
            self._opened[framework] = os.open(framework, _DIR, dir_fd=self.root)
        return self._opened[framework]

    def remove_empty(self, frameworks: Iterable[str]) -> None:
        """Each framework's directory removed if empty (not empty: ENOTEMPTY, left)."""
        for framework in frameworks:
            with contextlib.suppress(OSError):
                os.rmdir(framework, dir_fd=self.root)

    def __enter__(self) -> _Dirs:
        return self

    def __exit__(self, *_: object) -> None:
        for fd in [*self._opened.values(), *([] if self.trash is None else [self.trash])]:
            os.close(fd)
        os.close(self.root)


class _Removal:
    """What is under a directory removed, from its descriptor down (in a thread)."""

    def __init__(
        self,
        top: int,
        dev: int,
        until: float | None,
        stop: threading.Event,
        fresh: Callable[[], str] | None = None,
    ) -> None:
        self.top, self.dev, self.until, self.stop, self.fresh = top, dev, until, stop, fresh
        self.moved_up = False

    def out_of_time(self) -> bool:
        return self.stop.is_set() or (self.until is not None and time.monotonic() > self.until)

    def remove(self, name: str, parent: int | None = None, depth: int = 0) -> bool:
        """`name` in `parent` (the top) removed, and all under it: False if some of it
        stays (time up, a mount, what the kernel refused)."""
        parent = self.top if parent is None else parent
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                os.unlink(name, dir_fd=parent)  # (a symlink goes, never what it names)
                return True
            if st.st_dev != self.dev:
                return False  # (a mount point: never entered)
            if depth >= MAX_DEPTH:  # (in place, no trash to move it up to: it stays)
                if self.fresh is None:
                    return False
                os.rename(name, self.fresh(), src_dir_fd=parent, dst_dir_fd=self.top)
                self.moved_up = True
                return True
            fd = _open_within(parent, name)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        try:
            emptied = self._empty(fd, depth)
        finally:
            os.close(fd)
        if not emptied:
            return False
        try:
            os.rmdir(name, dir_fd=parent)
        except FileNotFoundError:
            pass
        except OSError:
            return False
        return True

    def _empty(self, fd: int, depth: int) -> bool:
        for _ in range(3):  # (a process of the task's user may add meanwhile)
            met, whole = False, True
            # each entry removed as it is read, not after a whole listing: a directory
            # too wide to list within a step (a tenant's 300,000 empty files) still
            # shrinks at every step, and what lies after it in the trash is reached
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        met = True
                        if self.out_of_time():
                            return False
                        whole = self.remove(entry.name, fd, depth + 1) and whole
            except OSError:
                return False
            if not met:
                return True
            if not whole:  # (what stays, stays: the next look tries again)
                return False
        return not _names(fd)


def _open_within(parent: int, name: str) -> int:
    """The directory `name` in `parent`, opened, never through a symlink; one closed to
    its owner (mode 0 on a slave that is not root) is opened to it first."""
    try:
        fd = os.open(name, _DIR, dir_fd=parent)
    except PermissionError:
        flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        path = os.open(name, flags, dir_fd=parent)
        try:
            os.chmod(f"/proc/self/fd/{path}", 0o700)
        finally:
            os.close(path)
        fd = os.open(name, _DIR, dir_fd=parent)
    st = os.fstat(fd)
    if st.st_mode & 0o700 != 0o700:  # (its owner may not remove what is in it)
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o700)
    return fd


def _names(fd: int) -> list[str]:
    try:
        with os.scandir(fd) as entries:
            return [e.name for e in entries]
    except OSError:
        return []


def _mtimes(fd: int) -> dict[str, float]:
    """The names in a directory and their mtimes; one gone between the listing and its
    stat is left out, not the whole directory (whose ends seen would then be forgotten
    as gone by other hands, and its ended sandboxes timed anew from their mtimes)."""
    found: dict[str, float] = {}
    with os.scandir(fd) as entries:
        for entry in entries:
            with contextlib.suppress(FileNotFoundError):
                found[entry.name] = entry.stat(follow_symlinks=False).st_mtime
    return found


def _by_framework(root: Path, read: Callable[[int], T]) -> Iterator[tuple[str, T]]:
    """Each framework's directory under `root` (`sandboxes/` or `runs/`; the trash aside)
    and what `read` finds in it: none where `root` is not there yet, nor a framework's
    that cannot be opened or read."""
    try:
        top = os.open(root, _DIR)
    except OSError:
        return
    try:
        for framework in _dirs(top):
            if framework == TRASH:
                continue
            try:
                fd = os.open(framework, _DIR, dir_fd=top)
            except OSError:
                continue
            try:
                found = read(fd)
            except OSError:
                continue
            finally:
                os.close(fd)
            yield framework, found
    finally:
        os.close(top)


def _mounted(*roots: Path) -> list[set[Key]]:
    """For each of `roots`, the (framework, name)s under it with a mount point under them
    (or on them), in this namespace: the mount table read once for all."""
    prefixes = [f"{os.path.realpath(root)}/" for root in roots]
    found: list[set[Key]] = [set() for _ in roots]
    with contextlib.suppress(OSError), open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            point = _unescape(line.split(b" ")[4])
            for prefix, under in zip(prefixes, found, strict=True):
                if point.startswith(prefix):
                    parts = point[len(prefix) :].split("/")
                    if len(parts) >= 2:
                        under.add((parts[0], parts[1]))
    return found


def _dirs(fd: int) -> list[str]:
    with os.scandir(fd) as entries:
        return [e.name for e in entries if e.is_dir(follow_symlinks=False)]


def _unescape(raw: bytes) -> str:
    """A mountinfo field: spaces, tabs, newlines and backslashes as octal escapes."""
    return raw.decode("unicode_escape").encode("latin-1").decode(errors="replace")
