"""The one thread through which a process's journals reach the disk: a group commit.

A journal file hands over, once a turn of its event loop, what was put in that turn: one
write, synced if someone waits for it. The thread takes everything handed over since it
last finished (every file's, from every event loop of the process), writes each in the
order it came, syncs each file once, and answers each event loop with one callback. So a
busy process pays one trip and one `fdatasync` a file for all the records that came while
the disk was busy with the last sync, and a quiet one is answered as soon as its record
is on disk; trips that sync are at most one a millisecond (WINDOW_SECONDS), so that a
disk quicker than the records come does not cost a trip and a sync a record.

A thread of our own, long-lived (it ends after a while with nothing to do, and starts
again on the next write), rather than `asyncio.to_thread`: a trip through the default
executor cost the event loop about 70 us of CPU (its futures chained across the thread,
its pool's wake-ups holding the GIL) and two tasks of the journal's own a batch. Only this
thread opens, writes, syncs, replaces or closes a journal's file, in the order they were
handed over, so nothing can close a file under a sync.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from protocol import logs

LOG = logs.get("journal")

IDLE_SECONDS = 5.0  # the thread ends after this long with nothing to write
# at most one trip that syncs this often: what comes meanwhile waits to share the next
# (a busy process then pays a wake-up and a sync per millisecond, not per record, and a
# quiet one, its last sync long past, goes at once)
WINDOW_SECONDS = 0.001


class DiskFile:
    """A journal's file as the disk thread holds it: opened for appending when first
    written, closed by a close or a failed write (the next write opens it again)."""

    __slots__ = ("cut_at", "fd", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None
        self.cut_at: int | None = None  # where a failed append began, if not cut yet

    def append(self, data: bytes) -> None:
        if self.fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        fd = self.fd
        if self.cut_at is not None:
            os.ftruncate(fd, self.cut_at)
            self.cut_at = None
        start = os.lseek(fd, 0, os.SEEK_END)
        view = memoryview(data)
        try:
            while view:  # a regular file takes it in one write; a short one is finished here
                view = view[os.write(fd, view) :]
        except OSError:
            # a full disk takes part of a record and refuses the rest: cut back to the last
            # whole one, else every record appended behind the torn one (once the disk has
            # room again) would be cut off with it at the next load
            self.cut_at = start
            with contextlib.suppress(OSError):
                os.ftruncate(fd, start)
                self.cut_at = None
            raise

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)


Written = Callable[[OSError | None], None]  # told once a write is done: what failed it


@dataclass(eq=False, slots=True)
class Write:
    """What a file hands over in one turn: `data` appended (or, `replace`, the file's
    whole new content: a compaction), synced if `sync`, the file closed after if `close`;
    once it is done, `waiters` answered and `told` called (with `error` if it failed, in
    the order they came), then `done`."""

    file: DiskFile
    data: bytes
    sync: bool
    waiters: list[asyncio.Future[None]]
    told: list[Written]
    done: Callable[[Write], None]
    replace: bool = False
    close: bool = False
    error: OSError | None = field(default=None)


class Source(Protocol):
    def take(self) -> Write | None:
        """What is pending now, as one write (None: nothing)."""


class _Turn:
    """An event loop's files with something pending: handed over together at the end of
    the turn (its other callbacks first), in one trip to the thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.sources: list[Source] = []

    def add(self, source: Source) -> None:
        if not self.sources:
            self.loop.call_soon(self._hand_over)
        self.sources.append(source)

    def _hand_over(self) -> None:
        sources, self.sources = self.sources, []
        writes = [w for s in sources if (w := s.take()) is not None]
        if writes:
            _DISK.submit(self.loop, writes)


_TURNS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Turn] = weakref.WeakKeyDictionary()


def hand_over_soon(source: Source) -> None:
    """Take what `source` has pending at the end of this turn, and write it."""
    loop = asyncio.get_running_loop()
    turn = _TURNS.get(loop)
    if turn is None:
        turn = _TURNS[loop] = _Turn(loop)
    turn.add(source)


class _DiskThread:
    def __init__(self) -> None:
        self._wake = threading.Condition()
        self._queue: list[tuple[asyncio.AbstractEventLoop, list[Write]]] = []
        self._running = False

    def forked(self) -> None:
        """In a child forked without exec: no thread, and nothing of its parent's to write."""
        self._wake, self._queue, self._running = threading.Condition(), [], False

    def submit(self, loop: asyncio.AbstractEventLoop, writes: list[Write]) -> None:
        with self._wake:
            self._queue.append((loop, writes))
            if self._running:
                self._wake.notify()
            else:
                self._running = True
                threading.Thread(target=self._run, name="journal-disk", daemon=True).start()

    def _run(self) -> None:
        last = 0.0  # when the last trip that synced began
        while True:
            with self._wake:
                if not self._queue:
                    self._wake.wait(IDLE_SECONDS)
                if not self._queue:
                    self._running = False
                    return
            if (wait := last + WINDOW_SECONDS - time.monotonic()) > 0:
                time.sleep(wait)  # (what is handed over meanwhile wakes nobody)
            with self._wake:
                batch, self._queue = self._queue, []
            every = [w for _, writes in batch for w in writes]
            if any(w.sync for w in every):  # (a trip of discards alone delays no sync)
                last = time.monotonic()
            try:
                write_and_sync(every)
            except Exception as e:  # (a bug of ours: each write told so, none left waiting)
                for w in every:
                    w.error = w.error or OSError(f"the journal's disk thread failed: {e!r}")
            answers: dict[asyncio.AbstractEventLoop, list[Write]] = {}
            for loop, writes in batch:
                answers.setdefault(loop, []).extend(writes)
            for loop, writes in answers.items():
                with contextlib.suppress(RuntimeError):  # (its loop closed: nobody waits)
                    loop.call_soon_threadsafe(_answer, writes)


_DISK = _DiskThread()
os.register_at_fork(after_in_child=_DISK.forked)


def write_and_sync(writes: list[Write]) -> None:
    """On the disk thread: each write done in order, then each file written to synced
    once (the first sync commits the file system's journal for all of them), then the
    files closed that a write asked to close. A write's failure is kept in it."""
    to_sync: dict[DiskFile, list[Write]] = {}
    to_close: list[DiskFile] = []
    for w in writes:
        try:
            if w.replace:
                w.file.close()  # (the next append opens the new file)
                w.file.cut_at = None  # (a failed append's place was the old file's)
                _replace(w.file.path, w.data, w.sync)
            elif w.data:
                w.file.append(w.data)
        except OSError as e:
            w.error = e
            with contextlib.suppress(OSError):
                w.file.close()
            continue
        if w.sync and not w.replace:
            to_sync.setdefault(w.file, []).append(w)
        if w.close:
            to_close.append(w.file)
    for file, synced in to_sync.items():
        try:
            if file.fd is not None:
                os.fdatasync(file.fd)
        except OSError as e:
            for w in synced:
                w.error = e
    for file in to_close:
        with contextlib.suppress(OSError):
            file.close()


def _answer(writes: list[Write]) -> None:
    """On the loop: each write's waiters answered, then its file told."""
    for w in writes:
        for waiter in w.waiters:
            if waiter.done():  # its caller was cancelled: the record is written anyway
                continue
            if w.error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(w.error)
        for tell in w.told:
            try:
                tell(w.error)
            except Exception:  # (its own bug: the other writes are answered all the same)
                LOG.exception("journal.told_failed", path=str(w.file.path))
        w.done(w)


def _replace(path: Path, data: bytes, sync: bool) -> None:
    """`path` becomes `data`, whole or not at all."""
    tmp = path.with_suffix(".compact")
    path.parent.mkdir(parents=True, exist_ok=True)
    # its owner's alone, as the journal it replaces (a slave's tasks may pass its dir)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with open(fd, "wb") as f:
        f.write(data)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if sync:  # the rename itself is in the directory
        fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
