"""A small durable key-value journal in a work dir (a slave's tasks and updates, a lone
master's registry).

What a party must not forget across a crash (status updates not yet acknowledged, the
tasks it runs) is written here before it acts on it. The journal is an append-only file
of msgpack records (`put key value` / `drop key`); loading replays it, and it is rewritten
from the live set when it has grown well past it: past four times its records and past
four times its bytes (so a few large records put and dropped leave no large file
behind), and not before 1,000 records or 4 MiB.

`await journal.put(...)` returns once the record is on disk: every write someone waits for
is followed by an `fdatasync`, so what a party acknowledged (a registered slave or
framework, an owed status update) survives the machine losing power, as Mesos's
replicated log does. A write of discards alone (`discard`: nobody waits) is not synced:
the file's next awaited write syncs it with the rest (an `fdatasync` covers the whole
file), as do `synced()` and `close()`.
`Journal(path, sync=False)` leaves records in the kernel's page cache (which survives the
process being killed, not the machine) for what is cheap to lose.

The writes are a group commit: one writer task takes every record made since its last
write (at least a turn of the event loop's), writes them with one `write` and syncs them
with one `fdatasync` in a worker thread, and answers their callers; the records made
meanwhile wait for the next write. The event loop never waits for the disk (an
`fdatasync` takes 0.2 ms on a quiet virtual disk and 4 ms on a busy one). The journals of
one process (ten logical slaves' twenty, say) share the thread's trips: the batches they
hand over in one turn go in one trip, all written, then each synced (the first sync
commits the file system's journal for all of them, so the rest are quick), since a trip
to a thread and back costs the event loop more than the write (70 us of CPU here, and
the thread pool's wakeups stall the loop holding the GIL). The thread writes through
each journal's own duplicate of its file descriptor, so nothing that closes the journal's
own can pull it away mid-sync.

A record torn by a kill in the middle of a write is cut off when the journal is loaded
(and logged), so that what is appended after it can be read back, and so is whatever
follows the last record that reads whole (bytes that are no msgpack at all): a journal
always loads. It is read a chunk at a time, however large the file.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack

from protocol import logs

LOG = logs.get("journal")

COMPACT_FACTOR = 4
COMPACT_MIN = 1000  # records
COMPACT_MIN_BYTES = 4 * 1024 * 1024
READ_CHUNK = 1024 * 1024  # bytes read at a time when loading


class Journal:
    def __init__(self, path: Path, *, sync: bool = True) -> None:
        self.path = path
        self.sync = sync  # fdatasync after every write (see the module's docstring)
        self._live: dict[str, Any] = {}
        self._sizes: dict[str, int] = {}  # bytes of each live key's record
        self._live_bytes = 0  # their sum: what a compacted file holds
        self._records = 0
        self._bytes = 0  # what the file holds
        self._pending: list[bytes] = []  # records made since the writer last took them
        # one future per caller waiting for the pending records: a caller cancelled while
        # it waits then cancels only its own, not the others' (as asyncio's own locks do)
        self._waiters: list[asyncio.Future[None]] = []
        self._writer: asyncio.Task[None] | None = None  # runs while anything is pending
        self._fd: int | None = None  # kept open between writes; closed by close()
        self._unsynced = False  # records written that no sync has covered yet (discards)
        self._load()

    def _load(self) -> None:
        try:
            f = open(self.path, "rb")  # noqa: SIM115 (read a chunk at a time, below)
        except (FileNotFoundError, NotADirectoryError):  # (nothing written yet)
            return
        with f:
            size = os.fstat(f.fileno()).st_size
            # (a record is at most what a message may be, 8 MiB: the buffer holds a whole
            # one; a torn length that claims more fills it, and is cut as below)
            unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
            whole = 0  # bytes up to the end of the last whole record
            try:
                while chunk := f.read(READ_CHUNK):
                    unpacker.feed(chunk)
                    for record in unpacker:
                        end = unpacker.tell()
                        self._apply(record, end - whole)
                        self._records += 1
                        whole = end
            except Exception:  # not msgpack at all past this point: keep what came before
                pass
        self._bytes = whole
        if whole < size:
            self._truncate(whole, size)

    def _truncate(self, whole: int, size: int) -> None:
        """Cut a torn tail (killed mid-write) so that later appends follow the last whole
        record: left in place, it would swallow the next record appended behind it."""
        LOG.warning(
            "journal.torn_tail_truncated", path=str(self.path), kept=whole, dropped=size - whole
        )
        with open(self.path, "r+b") as f:
            f.truncate(whole)
            if self.sync:
                os.fsync(f.fileno())

    def _apply(self, record: Any, size: int) -> None:
        if not isinstance(record, list) or not record:
            return
        if record[0] == "put" and len(record) == 3:
            self._set(record[1], record[2], size)
        elif record[0] == "drop" and len(record) == 2:
            self._unset(record[1])

    def _set(self, key: str, value: Any, size: int) -> None:
        self._live[key] = value
        self._live_bytes += size - self._sizes.get(key, 0)
        self._sizes[key] = size

    def _unset(self, key: str) -> None:
        self._live.pop(key, None)
        self._live_bytes -= self._sizes.pop(key, 0)

    # -- reading -----------------------------------------------------------------------------
    def get(self, key: str) -> Any:
        return self._live.get(key)

    def items(self) -> Iterator[tuple[str, Any]]:
        return iter(list(self._live.items()))

    def __contains__(self, key: object) -> bool:
        return key in self._live

    def __len__(self) -> int:
        return len(self._live)

    # -- writing -----------------------------------------------------------------------------
    async def put(self, key: str, value: Any) -> None:
        """Record `key = value`; returns once it is on disk (records land in the order
        they are made)."""
        chunk = msgpack.packb(["put", key, value], use_bin_type=True)
        self._set(key, value, len(chunk))
        self._add(chunk)
        await self._wait()

    async def drop(self, key: str) -> None:
        if key in self._live:
            self._unset(key)
            await self._append(["drop", key])

    def discard(self, key: str) -> None:
        """Drop `key` without waiting for the record to reach the file: it goes with the
        next write, and is synced with the next write someone waits for. For what is
        harmless to forget late (an acknowledged update: after a crash before the sync
        it is re-sent, and acknowledged again), so that a batch of them is handled in one
        turn, not a turn each, and costs no sync of its own."""
        if key in self._live:
            self._unset(key)
            self._add(msgpack.packb(["drop", key], use_bin_type=True))

    async def synced(self) -> None:
        """Returns once every record made so far is on disk (the discards too)."""
        if self._pending or self._writer is not None or self._unsynced:
            await self._wait()

    async def _append(self, record: list[Any]) -> None:
        self._add(msgpack.packb(record, use_bin_type=True))
        await self._wait()

    def _add(self, chunk: bytes) -> None:
        self._pending.append(chunk)
        self._start_writer()

    async def _wait(self) -> None:
        """Wait for the next batch the writer takes (it holds every record made so far)."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._start_writer()
        await waiter

    def _start_writer(self) -> None:
        if self._writer is None:  # it first runs after this turn's other callbacks
            self._writer = asyncio.get_running_loop().create_task(self._write_batches())

    async def _write_batches(self) -> None:
        """The group commit: take what is pending, write and sync it, answer its callers;
        again while more came meanwhile."""
        waiters: list[asyncio.Future[None]] = []
        try:
            while self._pending or self._waiters:
                chunks, self._pending = self._pending, []
                waiters, self._waiters = self._waiters, []
                # what nobody waits for (discards alone) is written unsynced: the next
                # awaited write's sync covers it, as it covers the whole file
                sync = bool(waiters) and (bool(chunks) or self._unsynced)
                error = await self._commit(chunks, sync) if chunks or sync else None
                for waiter in waiters:
                    if waiter.done():  # its caller was cancelled: the record is written anyway
                        continue
                    if error is not None:
                        waiter.set_exception(error)
                    else:
                        waiter.set_result(None)
                waiters = []
        finally:  # (cancelled: the loop is going away; its callers with it)
            self._writer = None
            for waiter in (*waiters, *self._waiters):
                waiter.cancel()

    async def _commit(self, chunks: list[bytes], sync: bool) -> OSError | None:
        """Write `chunks` (or the live set they are already part of, compacted), and sync
        the file if `sync` (someone waits for them)."""
        try:
            self._records += len(chunks)
            self._bytes += sum(map(len, chunks))
            if self._records > max(COMPACT_MIN, COMPACT_FACTOR * len(self._live)) or (
                self._bytes > max(COMPACT_MIN_BYTES, COMPACT_FACTOR * self._live_bytes)
            ):
                await self._compact()
                self._unsynced = False
            elif self.sync and sync:
                self._open()
                assert self._fd is not None
                await _shared_sync().write(os.dup(self._fd), b"".join(chunks))
                self._unsynced = False
            else:
                self._open()
                assert self._fd is not None
                _write_all(self._fd, b"".join(chunks))  # (the page cache's: microseconds)
                self._unsynced = self.sync
        except OSError as e:
            LOG.error("journal.write_failed", path=str(self.path), error=str(e))
            return e
        return None

    def _open(self) -> None:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    async def _compact(self) -> None:
        """Rewrite the file as the live set (made now, so it holds every record taken)."""
        data = b"".join(
            msgpack.packb(["put", key, value], use_bin_type=True)
            for key, value in self._live.items()
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(_replace, self.path, data, self.sync)
        self._records, self._bytes = len(self._live), len(data)
        self._close_fd()  # the next append opens the new file

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    async def close(self) -> None:
        """Write what is pending and close the file (a later write opens it again)."""
        if self._pending or self._unsynced:  # the records nobody waits for (discards) go
            waited = asyncio.ensure_future(self._wait())  # too, synced
            with contextlib.suppress(OSError):  # (logged by the writer)
                await asyncio.shield(waited)
        if self._writer is not None:
            await asyncio.shield(self._writer)
        self._close_fd()


class _SharedSync:
    """The trips to a worker thread that the journals of one event loop share: what is
    handed over in one turn goes in one trip (see the module's docstring)."""

    def __init__(self) -> None:
        self._waiting: list[tuple[int, bytes, asyncio.Future[None]]] = []
        self._trips: asyncio.Task[None] | None = None

    async def write(self, fd: int, data: bytes) -> None:
        """Write `data` to `fd` (a duplicate: closed once written) and sync it; raises the
        OSError that failed it."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._waiting.append((fd, data, done))
        if self._trips is None:  # it first runs after this turn's other callbacks
            self._trips = loop.create_task(self._run())
        await done

    async def _run(self) -> None:
        batch: list[tuple[int, bytes, asyncio.Future[None]]] = []
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                errors = await asyncio.to_thread(_write_and_sync_all, [b[:2] for b in batch])
                for (_, _, done), error in zip(batch, errors, strict=True):
                    if done.done():  # its writer was cancelled: written anyway
                        continue
                    if error is None:
                        done.set_result(None)
                    else:
                        done.set_exception(error)
                batch = []
        finally:  # (cancelled: the loop is going away, its writers with it)
            self._trips = None
            for fd, _, done in self._waiting:  # never handed over: nobody else closes them
                os.close(fd)
                done.cancel()
            self._waiting = []
            for _, _, done in batch:
                done.cancel()


_SHARED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _SharedSync] = (
    weakref.WeakKeyDictionary()
)


def _shared_sync() -> _SharedSync:
    loop = asyncio.get_running_loop()
    shared = _SHARED.get(loop)
    if shared is None:
        shared = _SHARED[loop] = _SharedSync()
    return shared


def _write_and_sync_all(writes: list[tuple[int, bytes]]) -> list[OSError | None]:
    """In a worker thread: each (fd, data) written, then each synced; each fd is its own
    (a dup), closed here whatever happens. What failed each, in order."""
    errors: list[OSError | None] = [None] * len(writes)
    for i, (fd, data) in enumerate(writes):
        try:
            _write_all(fd, data)
        except OSError as e:
            errors[i] = e
    for i, (fd, _) in enumerate(writes):
        try:
            if errors[i] is None:
                os.fdatasync(fd)
        except OSError as e:
            errors[i] = e
        finally:
            os.close(fd)
    return errors


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:  # a regular file takes it in one write; a short one is finished here
        view = view[os.write(fd, view) :]


def _replace(path: Path, data: bytes, sync: bool) -> None:
    """In a worker thread: `path` becomes `data`, whole or not at all."""
    tmp = path.with_suffix(".compact")
    # its owner's alone, as the journal it replaces (a slave's tasks may pass its dir)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with open(fd, "wb") as f:
        f.write(data)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if sync:  # the rename itself is in the directory
        _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
