"""Cgroupfs files and directories: the reads, writes, mkdirs, renames and rmdirs the
`cgroups` module makes of them, with raw os calls (a task costs some forty of them)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path
from stat import S_ISDIR


class At:
    """A path below a directory held open (a v1 hierarchy's mount): the kernel walks it
    from there, not from / through /sys, /sys/fs/cgroup and the hierarchy's mount. A task
    costs some forty cgroupfs paths (renamed, written, read, removed), and each whole
    walk took about 5 us here, a fifth of what a task's cgroups cost the slave."""

    __slots__ = ("dir_fd", "rel")

    def __init__(self, dir_fd: int, rel: str) -> None:
        self.dir_fd = dir_fd
        self.rel = rel

    def __truediv__(self, part: str) -> At:
        return At(self.dir_fd, f"{self.rel}/{part}")


Loc = Path | At


def open_at(loc: Loc, flags: int, mode: int = 0o777) -> int:
    if isinstance(loc, At):
        return os.open(loc.rel, flags, mode, dir_fd=loc.dir_fd)
    return os.open(loc, flags, mode)


def write(path: Loc, value: object) -> None:
    fd = open_at(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)  # (raw: see read)
    try:
        os.write(fd, str(value).encode())
    finally:
        os.close(fd)


def rename_all(mounts: list[int], old: str, new: str) -> bool:
    """`old` renamed `new` in every hierarchy (its mount's fd); False (and where it went,
    back) if not."""
    done: list[int] = []
    for fd in mounts:
        try:
            os.rename(old, new, src_dir_fd=fd, dst_dir_fd=fd)
        except OSError:
            for back in done:
                with contextlib.suppress(OSError):
                    os.rename(new, old, src_dir_fd=back, dst_dir_fd=back)
            return False
        done.append(fd)
    return True


def mkdir(path: Loc) -> bool:
    """Make a cgroup (and its parents); False if it was there."""
    try:
        if isinstance(path, At):
            os.mkdir(path.rel, dir_fd=path.dir_fd)
        else:
            os.mkdir(path)
    except FileExistsError:
        return False
    except FileNotFoundError:
        if isinstance(path, At):
            parts = path.rel.split("/")
            for i in range(1, len(parts)):
                with contextlib.suppress(FileExistsError):
                    os.mkdir("/".join(parts[:i]), dir_fd=path.dir_fd)
            return mkdir(path)
        path.mkdir(parents=True, exist_ok=True)
    return True


def read(path: Loc) -> str:
    # raw os calls: a slave reads a few files a task every few seconds, and open()'s
    # buffered text layer costs several times the read itself
    fd = open_at(path, os.O_RDONLY)
    try:
        return os.read(fd, 65536).decode()
    finally:
        os.close(fd)


def keyed(path: Loc) -> dict[str, int]:
    """A flat keyed file ("name value" lines) such as cpu.stat or memory.events."""
    out: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in read(path).splitlines():
            key, _, value = line.partition(" ")
            with contextlib.suppress(ValueError):
                out[key] = int(value.split()[0])
    return out


def read_int(path: Loc, default: int = 0) -> int:
    try:
        return int(read(path).split()[0])
    except (OSError, ValueError, IndexError):
        return default


def kill(tops: list[Path], kill_file: Path | None = None) -> None:
    """SIGKILL what is in `tops` and below them until they are empty (a forking task may
    race us), then remove the cgroups below them (podman's, for a container image under a
    task's cgroup). `kill_file` is v2's cgroup.kill, which does it atomically."""
    dirs = [below for d in tops for below in tree(d)]
    deadline = time.monotonic() + 10.0
    while True:
        pids = {p for d in dirs for p in procs(d)}
        if not pids:
            break
        if kill_file is not None and kill_file.exists():
            with contextlib.suppress(OSError):
                write(kill_file, 1)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise OSError(f"cgroup {dirs[0]} still holds processes {sorted(pids)}")
        time.sleep(0.01)  # dying processes leave the cgroup within a few ms
    rmdirs([d for d in dirs if d not in tops], deadline)


def rmdirs(dirs: list[Path], deadline: float) -> None:
    for d in dirs:
        while True:
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)


def tree(d: Path) -> list[Path]:
    """`d` and the cgroups under it, the deepest first (the order rmdir takes them)."""
    below: list[Path] = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(d):
            if entry.is_dir(follow_symlinks=False):
                below += tree(Path(entry.path))
    return [*below, d]


def rmdir(d: Loc) -> bool:
    """Remove one empty cgroup; True if it is gone."""
    try:
        if isinstance(d, At):
            os.rmdir(d.rel, dir_fd=d.dir_fd)
        else:
            d.rmdir()
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


# what a memory cgroup may hold at its end without a reclaim: the kernel's per-cpu charge
# stock (64 pages) and a page or two; the reclaim (v1's force_empty) costs milliseconds of
# CPU whatever it finds, too much for each task of a task loop
SMALL_CHARGE = 1 << 20


def drop_cache(charged: int, stat: Path, dirty: tuple[str, ...], drop: Path, force: bool) -> bool:
    """Empty a memory cgroup of its page cache before its rmdir (its processes gone), if
    it holds more than SMALL_CHARGE (`charged`, its kernel memory not counted: the kernel
    hands that to the parent). False while some of it is dirty or under writeback: the
    kernel writes it back within its dirty_expire (30 s), sooner for what was handed to it
    (`forget_files`); `force` goes on without it (it may then linger as a zombie)."""
    if charged <= SMALL_CHARGE:
        return True
    counts = keyed(stat)
    if sum(counts.get(key, 0) for key in dirty):
        return force  # (forced, not dropped: it would reclaim in vain for up to 100 ms)
    if drop.exists():
        with contextlib.suppress(OSError):  # (v2's memory.reclaim: EAGAIN if it fell short)
            write(drop, 0 if drop.name == "memory.force_empty" else charged)
    return True


def subdirs(d: At) -> int:
    """How many cgroups are right below it (a directory's links, less its own two); -1
    if it is not there."""
    try:
        return os.stat(d.rel, dir_fd=d.dir_fd).st_nlink - 2
    except OSError:
        return -1


def isdir(d: At) -> bool:
    try:
        return S_ISDIR(os.stat(d.rel, dir_fd=d.dir_fd).st_mode)
    except OSError:
        return False


def procs(d: Loc) -> list[int]:
    try:
        return [int(p) for p in read(d / "cgroup.procs").split()]
    except (OSError, ValueError):
        return []


def distinct(mounts: Iterable[Path]) -> list[Path]:
    """One path a hierarchy (cpu and cpuacct mounted together are one)."""
    seen: dict[str, Path] = {}
    for mount in mounts:
        seen.setdefault(os.path.realpath(mount), mount)
    return list(seen.values())
