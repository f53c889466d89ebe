"""Cgroups made and removed off the task's path, and the leftovers of slaves that are gone.

`Upkeep`, in one thread hop at a time: cgroups made ahead (v1), which a task's launch
renames to its own, and finished tasks' cgroups removed. A task's end is reported first;
its cgroup goes a moment later, with those of the tasks that ended beside it.

A memory cgroup still charged with dirty page cache (the task's output) waits until the
kernel has written it back (begun at the first look at its sandbox), and that is dropped,
so that nothing is left charged to it when it goes: on cgroup v1 a memory cgroup removed
with page cache lingers unseen as a zombie, one of the kernel's 64K memory cgroup ids gone
until memory runs short; a task loop made thousands a minute. One with nothing charged
(a task that wrote no file: its exit status is written from outside it) goes at the first
look.

A live slave holds its parent cgroup's directory locked (flock). At its start a slave
removes what the others under drfmesos/ that hold no lock (stopped, or killed and never
restarted) left behind: their empty cgroups made over a minute ago. A task still running
keeps its cgroup, for its slave to recover.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from slave.cgroups import Cgroups

BATCH = 0.05  # what ends within this goes in one thread hop
# a task's sandbox written back (begun at the first look), then while its page cache is
# dirty, then it goes anyway: the kernel writes dirty pages back within its dirty_expire
# (30 s) and the flusher's period (5 s)
RETRY = (1.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
CLOSING = 2.0  # a stopping slave waits this long for dirty pages, no longer
STALE_AFTER = 60.0  # an empty cgroup this old is no launch about to join it
SPARES = 16  # made ahead: a burst of launches (an offer's worth) takes them, no mkdir
SPARE = "~spare-"  # (no container's name holds a ~: container_name replaces it)


def is_spare(path: str) -> bool:
    return os.path.basename(path).startswith(SPARE)


class Upkeep:
    """Spare cgroups made and finished containers' cgroups removed, in batches, in a
    thread: a mkdir or an rmdir of a cgroup costs a tenth of a millisecond of the kernel's
    time or more, in each hierarchy."""

    def __init__(self, cgroups: Cgroups, parent: str, log: Any) -> None:
        self.cgroups = cgroups
        self.parent = parent
        self.log = log
        self._spares: list[str] = []
        self._want_spares = False  # (from the first launch; never on v2, which cannot rename)
        self._can_spare = True
        self._made = 0
        self._due: dict[str, tuple[float, int, tuple[Path, ...]]] = {}
        self._inflight: set[str] = set()
        self._idle = asyncio.Event()  # no batch in a thread
        self._idle.set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing_at: float | None = None

    def __len__(self) -> int:
        return len(self._due) + len(self._inflight)

    def __contains__(self, path: object) -> bool:
        return path in self._due or path in self._inflight

    def add(self, path: str, files: Iterable[Path] = ()) -> None:
        """Remove `path` (its processes killed) soon; `files` are what its task wrote
        (their page cache is charged to it)."""
        self._due[path] = (time.monotonic() + BATCH, 0, tuple(files))
        self._kick()

    def spare(self) -> str | None:
        """A cgroup made ahead, if one is ready (more are made when few are left)."""
        spare = self._spares.pop() if self._spares else None
        self._want_spares = self._can_spare
        if self._short():
            self._kick()
        return spare

    def unused(self, spare: str) -> None:
        self._spares.append(spare)

    def _kick(self) -> None:
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="cgroup-upkeep")

    def _short(self) -> int:
        """How many spares to make now."""
        if not self._want_spares or self._closing_at is not None:
            return 0
        return SPARES - len(self._spares) if len(self._spares) < SPARES // 2 else 0

    async def take_back(self, path: str) -> None:
        """A new container of the same name: the old one goes first, now."""
        while path in self._inflight:
            await self._idle.wait()
        if self._due.pop(path, None) is not None:
            await asyncio.to_thread(self.cgroups.destroy, path)

    async def close(self) -> None:
        """Remove what is left, waiting a moment for dirty pages (then anyway)."""
        self._closing_at = now = time.monotonic()
        self._due = {p: (now, tries, files) for p, (_, tries, files) in self._due.items()}
        self._due.update((spare, (now, 1, ())) for spare in self._spares)
        self._spares = []
        self._wake.set()
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        while self._due or self._short():
            now = time.monotonic()
            soonest = min((due for due, _, _ in self._due.values()), default=now)
            if soonest > now and not self._short():
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), soonest - now)
                continue
            closing = self._closing_at is not None
            batch = {p: v for p, v in self._due.items() if v[0] <= now}
            for p in batch:
                del self._due[p]
            self._inflight = set(batch)
            self._idle.clear()
            force = closing and now - (self._closing_at or now) > CLOSING
            names = [f"{self.parent}/{SPARE}{self._made + i}" for i in range(self._short())]
            self._made += len(names)
            try:
                # (shielded: a cancelled slave does not leave a batch half known)
                left, made, renames = await asyncio.shield(
                    asyncio.to_thread(self._work, batch, force, names)
                )
            finally:
                self._inflight = set()
                self._idle.set()
            if not renames:
                self._want_spares = self._can_spare = False
            if self._closing_at is None:
                self._spares += made
            else:
                self._due.update((spare, (time.monotonic(), 1, ())) for spare in made)
            now = time.monotonic()
            for path, (tries, files) in left.items():
                if path not in self._due:  # (not made again meanwhile)
                    wait = 0.1 if closing else RETRY[tries]
                    self._due[path] = (now + wait, tries + 1, files)

    def _work(
        self, batch: dict[str, tuple[float, int, tuple[Path, ...]]], force: bool, spares: list[str]
    ) -> tuple[dict[str, tuple[int, tuple[Path, ...]]], list[str], bool]:
        """(In a thread.) What is not gone yet, to try again; the spares made; whether
        this version of cgroups renames spares into containers at all."""
        made: list[str] = []
        for name in spares:
            try:
                if not self.cgroups.make_spare(name):
                    return self._remove(batch, force), made, False
            except OSError as e:  # (tried again at the next launch)
                self.log.warning("isolation.spare_failed", cgroup=name, error=str(e))
                batch = {**batch, name: (0.0, 1, ())}  # (what of it was made goes)
                break
            made.append(name)
        return self._remove(batch, force), made, True

    def _remove(
        self, batch: dict[str, tuple[float, int, tuple[Path, ...]]], force: bool
    ) -> dict[str, tuple[int, tuple[Path, ...]]]:
        left: dict[str, tuple[int, tuple[Path, ...]]] = {}
        for path, (_, tries, files) in batch.items():
            last = force or tries >= len(RETRY)
            try:
                # a task that left nothing charged (wrote no file): no look at its files,
                # no second look; it goes now
                if tries == 0 and self.cgroups.uncharged(path) and self.cgroups.release(path):
                    continue
                forget_files(files)
                if tries == 0 and files:
                    # its files' writeback begun: its memory cgroup at the next look
                    self.cgroups.release(path, memory=False)
                elif self.cgroups.release(path, force=last):
                    continue
                else:
                    if self.cgroups.pids(path) or self.cgroups.children(path):
                        self.cgroups.kill(path)  # what holds it: processes, podman's cgroups
                        if self.cgroups.release(path, force=last):
                            continue
                    if last:  # (its dirty pages kept, or the kernel refused the rmdir)
                        raise OSError("the kernel would not remove it")
            except OSError as e:
                if last:  # left for the next start's recovery to clean
                    self.log.warning("isolation.destroy_failed", cgroup=path, error=str(e))
                    continue
            left[path] = (tries, files)
        return left


def hold(cgroups: Cgroups, parent: str, log: Any, wait: float = 2.0) -> int | None:
    """Lock the slave's parent cgroup for as long as the slave runs (the lock goes with
    the process, killed or not). A sweeping slave holds it a moment: wait for it. Another
    process holding it longer (a slave of the same id) is logged, not fatal."""
    deadline = time.monotonic() + wait
    while True:
        d = cgroups.lock_dir(parent)
        try:
            d.mkdir(parents=True, exist_ok=True)
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as e:  # (its tasks fail to start as they would anyway)
            log.warning("isolation.parent_lock_failed", cgroup=parent, error=str(e))
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() > deadline:
                log.warning("isolation.parent_locked_elsewhere", cgroup=parent)
                return None
            time.sleep(0.05)
            continue
        with contextlib.suppress(OSError):
            if os.stat(d).st_ino == os.fstat(fd).st_ino:
                return fd
        os.close(fd)  # a sweeper removed it while we waited: make it again


def sweep(cgroups: Cgroups, parents: str, own: str) -> list[str]:
    """(In a thread.) Remove what slaves under `parents` that are gone (none holds its
    lock) left: their empty cgroups older than STALE_AFTER, and their parent if nothing is
    left in it. The cgroups removed."""
    removed: list[str] = []
    for other in cgroups.children(parents):
        if other == own:
            continue
        d = cgroups.lock_dir(other)
        try:
            d.mkdir(exist_ok=True)  # (left in another hierarchy only)
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # its slave runs
            os.close(fd)
            continue
        try:
            for child in cgroups.children(other):
                if _stale(cgroups.lock_dir(child)) and not cgroups.pids(child):
                    with contextlib.suppress(OSError):
                        if cgroups.release(child) or cgroups.release(child, force=True):
                            removed.append(child)
            if not cgroups.children(other):
                with contextlib.suppress(OSError):
                    cgroups.release(other, force=True)
        finally:
            os.close(fd)
    return removed


def _stale(d: Path) -> bool:
    try:
        return time.time() - d.stat().st_mtime > STALE_AFTER
    except FileNotFoundError:
        return True  # (in the other hierarchies only)


def forget_files(paths: Iterable[Path], most: int = 10_000) -> None:
    """Start writing back what a task wrote to the regular files under these directories
    (`most` of them), and drop their clean page cache: it is charged to the task's memory
    cgroup, and keeps that from going at the task's end. An empty file has no page cache:
    it is not opened (a task's stdout and stderr often are). Each directory is held open
    and what is in it looked at from there (no walk of its whole path a file)."""
    todo, seen = [str(p) for p in paths], 0
    while todo and seen < most:
        path = todo.pop()
        try:
            d = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            with os.scandir(d) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        todo.append(f"{path}/{entry.name}")
                    elif entry.is_file(follow_symlinks=False) and (seen := seen + 1) <= most:
                        with contextlib.suppress(OSError):
                            if entry.stat(follow_symlinks=False).st_size:
                                _forget(d, entry.name)
        except OSError:
            pass
        finally:
            os.close(d)


def _forget(dir_fd: int, name: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
