"""Cgroups made and removed off the task's path, and the leftovers of slaves that are gone.

`Upkeep`, in one thread hop at a time: cgroups made ahead (v1), which a task's launch
renames to its own, and finished tasks' cgroups removed. A task's end is reported first;
its cgroup goes a moment later, with those of the tasks that ended beside it.

A finished task's cgroup that is as good as new once its counters are reset (nothing
charged to its memory, no process left, no OOM kill or throttling counted:
`Cgroups.recycle`) is kept as a spare instead, with the limits it holds, while fewer than
MOST_SPARES are: a task loop's tasks, which write no file, then cost no mkdir and no rmdir
(a third of a millisecond of the kernel's time each, in three hierarchies), and the next
launch with the same limits writes none.

Spares live in a principal's group (slave.principal_groups): cgroup v1 renames a cgroup
within its parent only. They are made for the group of the last launch, while fewer than
MOST_SPARES are kept in all; a finished container's cgroup is recycled within its group.
A group left empty (its principal's last container gone) is removed IDLE_GROUP later with
its spares, unless a launch of its principal takes it back first (a task loop's next).

A recycled cgroup goes to the next task launched in its group, as any: its `tasks` files were
never a task's user's to open (root joins each task's cgroup: slave.confine), so no
descriptor of a tenant's outlives its task there.

A memory cgroup still charged with dirty page cache (the task's output) waits until the
kernel has written it back (begun at the first look at its sandbox), and that is dropped,
so that nothing is left charged to it when it goes: on cgroup v1 a memory cgroup removed
with page cache lingers unseen as a zombie, one of the kernel's 64K memory cgroup ids gone
until memory runs short; a task loop made thousands a minute. One with nothing charged
(a task that wrote no file: its exit status is written from outside it) goes at the first
look.

A live slave holds its parent cgroup's directory locked (flock). At its start a slave
removes what the others under drfmesos/ that hold no lock (stopped, or killed and never
restarted) left behind: their empty cgroups made over a minute ago, and the groups
left empty. A task still running keeps its cgroup, for its slave to recover.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.transport.aio import within
from slave.cgroups import Cgroups, Limits
from slave.principal_groups import is_group

Held = Limits | None  # what a spare holds (None: a new cgroup's, nothing written)
Spare = tuple[str, Held]  # a spare cgroup, and what it holds

BATCH = 0.05  # what ends within this goes in one thread hop
# a task's sandbox written back (begun at the first look), then while its page cache is
# dirty, then it goes anyway: the kernel writes dirty pages back within its dirty_expire
# (30 s) and the flusher's period (5 s)
RETRY = (1.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
CLOSING = 2.0  # a stopping slave waits this long for dirty pages, no longer
STALE_AFTER = 60.0  # an empty cgroup this old is no launch about to join it
SPARES = 16  # made ahead: a burst of launches (an offer's worth) takes them, no mkdir
MOST_SPARES = 2 * SPARES  # kept, recycled ones included; past that, finished ones go
SPARE = "~spare-"  # (no container's name holds a ~: container_name replaces it)
IDLE_GROUP = 30.0  # an empty principal's group is kept this long for its next launch


@dataclass
class Due:
    """A finished container's cgroup, to go (or be recycled) at `at`."""

    at: float
    tries: int = 0
    files: tuple[Path, ...] = ()  # what its task wrote: their page cache is charged to it
    limits: Limits | None = None  # what it holds, if known: it may be recycled
    group: bool = False  # a principal's group, left empty: it goes after what is in it


def is_spare(path: str) -> bool:
    return os.path.basename(path).startswith(SPARE)


def _group_of(path: str) -> str:
    """The group a container's or a spare's cgroup is in (its parent: os.path.dirname's
    answer, at a fraction of its cost: a launch asks it of each cgroup due)."""
    return path.rpartition("/")[0]


class Upkeep:
    """Spare cgroups made and finished containers' cgroups removed, in batches, in a
    thread: a mkdir or an rmdir of a cgroup costs a tenth of a millisecond of the kernel's
    time or more, in each hierarchy."""

    def __init__(self, cgroups: Cgroups, parent: str, log: Any) -> None:
        self.cgroups = cgroups
        self.parent = parent
        self.log = log
        # spares by the group they are in and what they hold (Held), the last made or
        # recycled last
        self._spares: dict[str, dict[Held, list[str]]] = {}
        self._group = parent  # the last launch's group: where spares are made
        # the limits each live container's cgroup holds (its last `create`): a finished
        # one is recycled only if known (not a recovered task's, nor one a write failed)
        self.limits: dict[str, Limits] = {}
        self._want_spares = False  # (from the first launch; never on v2, which cannot rename)
        self._can_spare = True
        self._made = 0
        self._due: dict[str, Due] = {}
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
        """Remove `path` (its processes killed) soon, or recycle it; `files` are what
        its task wrote (their page cache is charged to it)."""
        limits = self.limits.pop(path, None)
        self._due[path] = Due(time.monotonic() + BATCH, 0, tuple(files), limits)
        self._kick()

    def spare(self, limits: Limits | None = None, group: str | None = None) -> Spare | None:
        """A cgroup made ahead in `group` (the slave's parent if None), if one is ready
        (more are made when few are left): one that holds `limits` already if there is
        one. (No user's process ever wrote to its `tasks` files: root joins each.)"""
        group = group or self.parent
        spares = self._spares.get(group, {})
        spare = None
        if spares:
            held = limits if limits in spares else next(iter(spares))
            names = spares[held]
            spare = names.pop(), held
            if not names:
                del spares[held]
            if not spares:
                del self._spares[group]
        self._group = group
        self._want_spares = self._can_spare
        if self._short():
            self._kick()
        return spare

    def unused(self, spare: Spare) -> None:
        name, held = spare
        self._spares.setdefault(_group_of(name), {}).setdefault(held, []).append(name)

    def _spare_count(self) -> int:
        # (a few groups and kinds, MOST_SPARES at most)
        return sum(len(names) for spares in self._spares.values() for names in spares.values())

    def _ready_count(self) -> int:
        """The spares the next launch (in the last one's group) may take."""
        return sum(len(v) for v in self._spares.get(self._group, {}).values())

    def idle(self, group: str) -> None:
        """A principal's group left empty: removed IDLE_GROUP from now, with its spares,
        unless `busy` first."""
        self._due[group] = Due(time.monotonic() + IDLE_GROUP, group=True)
        if self._task is None or self._task.done():  # (no wake: nothing is due sooner)
            self._task = asyncio.create_task(self._run(), name="cgroup-upkeep")

    async def busy(self, group: str) -> bool:
        """A launch in the group, left empty: it is not removed. False if it may have
        been meanwhile (the launch makes it again)."""
        while group in self._inflight:
            await self._idle.wait()
        if (due := self._due.get(group)) is not None and due.group:
            del self._due[group]
            return True
        return False

    def _kick(self) -> None:
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="cgroup-upkeep")

    def _short(self) -> int:
        """How many spares to make now."""
        if not self._want_spares or self._closing_at is not None:
            return 0
        # (those about to be recycled count: they come back in the same thread hop; a
        # group's are right in it, and a deeper path is never due: a prefix tells them)
        group = self._group + "/"
        have = self._ready_count() + sum(
            d.limits is not None and d.tries == 0 and p.startswith(group)
            for p, d in self._due.items()
        )
        if have >= SPARES // 2:
            return 0
        return max(0, min(SPARES - have, MOST_SPARES - self._spare_count()))  # (all groups')

    async def take_back(self, path: str) -> None:
        """A new container of the same name: the old one goes first, now."""
        while path in self._inflight:
            await self._idle.wait()
        if self._due.pop(path, None) is not None:
            await asyncio.to_thread(self.cgroups.destroy, path)
        self.limits.pop(path, None)

    async def close(self) -> None:
        """Remove what is left, waiting a moment for dirty pages (then anyway)."""
        self._closing_at = now = time.monotonic()
        for due in self._due.values():
            due.at, due.limits = now, None  # (none recycled now)
        self._due.update(
            (name, Due(now, 1))
            for spares in self._spares.values()
            for names in spares.values()
            for name in names
        )
        self._spares = {}
        if self._due:
            self._kick()  # (its task may have ended, nothing due till now)
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        while self._due or self._short():
            now = time.monotonic()
            soonest = min((due.at for due in self._due.values()), default=now)
            if soonest > now and not self._short():
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await within(self._wake.wait(), soonest - now)
                continue
            closing = self._closing_at is not None
            short = self._short()
            batch = {p: due for p, due in self._due.items() if due.at <= now}
            for p in batch:
                del self._due[p]
            going = self._going(batch)
            if self._group in going:  # (no launch since it emptied: none are made in it)
                short = 0
            names = [self._name(self._group) for _ in range(short)]
            # what may be recycled: while spares are wanted, up to MOST_SPARES
            room = MOST_SPARES - self._spare_count() - len(names)
            if not self._want_spares or closing:
                room = 0
            recycle: dict[str, tuple[str, Limits]] = {}
            for p, due in batch.items():
                group = _group_of(p)  # (a spare stays in it: v1 renames within one)
                fits = due.limits is not None and due.tries == 0 and len(recycle) < room
                if fits and due.limits is not None and group not in going:
                    recycle[p] = (self._name(group), due.limits)
            self._inflight = set(batch)
            self._idle.clear()
            force = closing and now - (self._closing_at or now) > CLOSING
            try:
                # (shielded: a cancelled slave does not leave a batch half known)
                left, made, renames = await asyncio.shield(
                    asyncio.to_thread(self._work, batch, force, names, recycle)
                )
            finally:
                self._inflight = set()
                self._idle.set()
            if not renames:
                self._want_spares = self._can_spare = False
            if self._closing_at is None:
                for spare in made:
                    self.unused(spare)
            else:
                self._due.update((spare, Due(time.monotonic(), 1)) for spare, _ in made)
            now = time.monotonic()
            for path, due in left.items():
                if path not in self._due:  # (not made again meanwhile)
                    due.at = now + (0.1 if closing else RETRY[due.tries])
                    due.tries += 1
                    self._due[path] = due

    def _going(self, batch: dict[str, Due]) -> set[str]:
        """The groups that go in this batch: their spares join it, and it is ordered so
        that what is in a group goes before the group."""
        going = {p for p, due in batch.items() if due.group}
        for group in going:
            for names in self._spares.pop(group, {}).values():
                batch.update((name, Due(0.0, 1)) for name in names)
        for group in going:  # (last)
            batch[group] = batch.pop(group)
        return going

    def _name(self, group: str) -> str:
        self._made += 1
        return f"{group}/{SPARE}{self._made}"

    def _work(
        self,
        batch: dict[str, Due],
        force: bool,
        spares: list[str],
        recycle: dict[str, tuple[str, Limits]],
    ) -> tuple[dict[str, Due], list[Spare], bool]:
        """(In a thread.) What is not gone yet, to try again; the spares made or
        recycled (`recycle`: the finished containers to try, the spare name each would
        take and the limits it holds); whether this version of cgroups renames spares
        into containers at all."""
        recycled = self.cgroups.recycle(recycle) if recycle else set()
        made: list[Spare] = []
        for path in recycled:
            due = batch.pop(path)
            made.append((recycle[path][0], due.limits))
        for name in spares:
            try:
                if not self.cgroups.make_spare(name):
                    return self._remove(batch, force), made, False
            except OSError as e:  # (tried again at the next launch)
                self.log.warning("isolation.spare_failed", cgroup=name, error=str(e))
                batch = {**batch, name: Due(0.0, 1)}  # (what of it was made goes)
                break
            made.append((name, None))
        return self._remove(batch, force), made, True

    def _remove(self, batch: dict[str, Due], force: bool) -> dict[str, Due]:
        left: dict[str, Due] = {}
        for path, due in batch.items():
            tries, files = due.tries, due.files
            last = force or tries >= len(RETRY)
            try:
                if due.group:  # (once what was in it has gone: what fails says so itself)
                    if not self.cgroups.children(path) and self.cgroups.release(path, force=last):
                        continue
                    # (a closing slave waits for what is in it as long as for the rest; left,
                    # it goes at the slave's close or its next start)
                    if not (force if self._closing_at is not None else last):
                        left[path] = due
                    continue
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
            left[path] = due
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
                if is_group(child):  # (a principal's: its containers, then itself)
                    removed += _sweep_stale(cgroups, cgroups.children(child))
                    if not cgroups.children(child):
                        removed += _sweep_stale(cgroups, [child], stale=False)
                else:
                    removed += _sweep_stale(cgroups, [child])
            if not cgroups.children(other):
                with contextlib.suppress(OSError):
                    cgroups.release(other, force=True)
        finally:
            os.close(fd)
    return removed


def _sweep_stale(cgroups: Cgroups, paths: list[str], stale: bool = True) -> list[str]:
    """Remove those of `paths` that hold no process (and, if `stale`, are older than
    STALE_AFTER); the ones removed."""
    removed = []
    for path in paths:
        if (not stale or _stale(cgroups.lock_dir(path))) and not cgroups.pids(path):
            with contextlib.suppress(OSError):
                if cgroups.release(path) or cgroups.release(path, force=True):
                    removed.append(path)
    return removed


def _stale(d: Path) -> bool:
    try:
        return time.time() - d.stat().st_mtime > STALE_AFTER
    except FileNotFoundError:
        return True  # (in the other hierarchies only)


def forget_files(paths: Iterable[Path], most: int = 10_000) -> None:
    """Start writing back what a task wrote to the regular files under these directories,
    and drop their clean page cache: it is charged to the task's memory cgroup, and keeps
    that from going at the task's end. An empty file has no page cache: it is not opened
    (a task's stdout and stderr often are). Each directory is held open and what is in it
    looked at from there (no walk of its whole path a file). At most `most` entries are
    looked at, directories as files: the sandbox is the tenant's to fill, and 100,000
    empty directories had cost the slave 1.3 s a look (attack91)."""
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
                    if (seen := seen + 1) > most:
                        break
                    if entry.is_dir(follow_symlinks=False):
                        todo.append(f"{path}/{entry.name}")
                    elif entry.is_file(follow_symlinks=False):
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
