"""A small durable key-value journal (a slave's tasks, updates and owners; a lone master's
registry), and the file a process keeps its journals in.

What a party must not forget across a crash (status updates not yet acknowledged, the
tasks it runs) is written here before it acts on it. A `JournalFile` is an append-only
file of msgpack records (`put key value` / `drop key`, each naming its journal); loading
replays it, and it is rewritten from the live set when it has grown well past it: past
four times its records and past four times its bytes (so a few large records put and
dropped leave no large file behind), and not before 1,000 records or 4 MiB.

One file holds the journals of a process (`JournalFile.journal(name)`: a slave's three,
a process's ten logical slaves' thirty), so that one `fdatasync` makes all their records
durable: twenty journals synced one after another cost 1 ms of CPU a trip to the disk
here, and 10-40 times the wall time of one. `Journal(path)` is a journal with a file of
its own (a lone master's registry). A journal that was a file of its own before, at the
path its name says beside the process's file, is moved into it when first opened (its
records written and synced in the process's file, then the old file removed).

`await journal.put(...)` returns once the record is on disk: every write someone waits for
is followed by an `fdatasync`, so what a party acknowledged (a registered slave or
framework, an owed status update) survives the machine losing power, as Mesos's
replicated log does. A write of discards alone (`discard`: nobody waits) is not synced:
the file's next awaited write syncs it with the rest (an `fdatasync` covers the whole
file), as do `synced()` and `close()`.
`Journal(path, sync=False)` leaves records in the kernel's page cache (which survives the
process being killed, not the machine) for what is cheap to lose.

The writes are a group commit (protocol.group_commit): what a file's journals put in one
turn of the event loop goes to the process's disk thread as one write, and the thread
writes and syncs everything handed over while it was busy with its last sync at once.
The event loop never waits for the disk (an `fdatasync` takes 0.2 ms on a quiet virtual
disk and 4 ms on a busy one).

A write that fails (a full disk: a tenant's task may fill the file system the journal
is on) is cut back to the last whole record, its waiters are told the error, and the
file's next write is the live set, whole (as a compaction): what the process holds is on
disk again as soon as the disk has room, in the order it was made.

A record torn by a kill in the middle of a write is cut off when the file is loaded (and
logged), so that what is appended after it can be read back, and so is whatever follows
the last record that reads whole (bytes that are no msgpack at all): a journal always
loads. It is read a chunk at a time, however large the file.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack

from protocol import logs
from protocol.group_commit import DiskFile, Write, Written, fsync_dir, hand_over_soon

LOG = logs.get("journal")

COMPACT_FACTOR = 4
COMPACT_MIN = 1000  # records
COMPACT_MIN_BYTES = 4 * 1024 * 1024
READ_CHUNK = 1024 * 1024  # bytes read at a time when loading
OWN = ""  # the name of the one journal of a file of its own (its records name none)


# one packer for every record (as protocol.wire.codec's: `msgpack.packb` makes one a
# call, most of a small record's cost; a record's plain values pack without running any
# Python code, so nothing can use it meanwhile)
_PACKER = msgpack.Packer(use_bin_type=True)


def _packed(op: str, name: str, key: str, *value: Any) -> bytes:
    # (a file of its own keeps the records it always had: ["put", key, value])
    record = [op, key, *value] if name == OWN else [op, key, *value, name]
    return _PACKER.pack(record)  # type: ignore[no-any-return]


class JournalFile:
    """One file of journals, and the group commit that writes it."""

    def __init__(self, path: Path, *, sync: bool = True) -> None:
        self.path = path
        self.dir = str(path.parent)  # (journals' names are relative to it)
        self.sync = sync  # fdatasync after every write (see the module's docstring)
        self._live: dict[str, dict[str, Any]] = {}  # journal name -> its live keys
        self._sizes: dict[tuple[str, str], int] = {}  # bytes of each live key's record
        self._live_bytes = 0  # their sum: what a compacted file holds
        self._live_keys = 0  # how many (every journal's)
        self._records = 0
        self._bytes = 0  # what the file holds
        self._disk = DiskFile(path)  # (the disk thread's alone)
        self._pending: list[bytes] = []  # records made since the last hand-over
        # one future per caller waiting for the pending records: a caller cancelled while
        # it waits then cancels only its own, not the others' (as asyncio's own locks do)
        self._waiters: list[asyncio.Future[None]] = []
        self._told: list[Written] = []  # called once the pending records are on disk
        self._handing_over = False  # taken at the end of this turn
        self._closing = False  # the next hand-over closes the file after it
        self._in_flight = 0  # writes handed over and not answered yet
        self._unsynced = False  # records handed over that no sync has covered (discards)
        self._rewrite = False  # a write failed: the next one is the live set, whole
        self._open_journals = 0
        self._load()

    def journal(self, name: str) -> Journal:
        """The journal `name` in this file (a path relative to the file's directory: what
        was a file of its own there is moved in)."""
        if name != OWN:
            self._move_in(name)
        self._open_journals += 1
        return Journal(self, name)

    # -- loading -----------------------------------------------------------------------------
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
        op, n = record[0], len(record)
        if op == "put" and n in (3, 4):
            self._set(record[3] if n == 4 else OWN, record[1], record[2], size)
        elif op == "drop" and n in (2, 3):
            self._unset(record[2] if n == 3 else OWN, record[1])

    def _move_in(self, name: str) -> None:
        """What was the file of its own at `name` becomes journal `name` here: written and
        synced here first, then that file removed (a crash between moves it in again, the
        same records)."""
        if not os.path.isfile(os.path.join(self.dir, name)):  # (mostly: it is not there)
            return
        old = self.path.parent / name
        records = dict(JournalFile(old, sync=self.sync)._live.get(OWN, {}))
        chunks = []
        for key, value in records.items():
            chunk = _packed("put", name, key, value)
            self._set(name, key, value, len(chunk))
            chunks.append(chunk)
        data = b"".join(chunks)
        here = DiskFile(self.path)  # (before anything is handed to the disk thread)
        try:
            here.append(data)
            if self.sync and here.fd is not None:
                os.fsync(here.fd)
        finally:
            here.close()
        self._records += len(chunks)
        self._bytes += len(data)
        old.unlink()
        if self.sync:
            fsync_dir(old.parent)
        LOG.info("journal.moved_in", path=str(self.path), journal=name, records=len(records))

    # -- the live set ------------------------------------------------------------------------
    def live(self, name: str) -> dict[str, Any]:
        return self._live.setdefault(name, {})

    def _set(self, name: str, key: str, value: Any, size: int) -> None:
        live = self.live(name)
        self._live_keys += key not in live
        live[key] = value
        self._live_bytes += size - self._sizes.get((name, key), 0)
        self._sizes[name, key] = size

    def _unset(self, name: str, key: str) -> None:
        live = self._live.get(name)
        if live is not None and key in live:
            del live[key]
            self._live_keys -= 1
        self._live_bytes -= self._sizes.pop((name, key), 0)

    # -- writing -----------------------------------------------------------------------------
    def put(self, name: str, key: str, value: Any) -> None:
        chunk = _packed("put", name, key, value)
        self._set(name, key, value, len(chunk))
        self._add(chunk)

    def drop(self, name: str, key: str) -> None:
        self._unset(name, key)
        self._add(_packed("drop", name, key))

    def _add(self, chunk: bytes) -> None:
        self._pending.append(chunk)
        if not self._handing_over:
            self._handing_over = True
            hand_over_soon(self)

    async def wait(self) -> None:
        """Until the next write handed over (it holds every record made so far) is on disk."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        if not self._handing_over:
            self._handing_over = True
            hand_over_soon(self)
        await waiter

    def on_disk(self, tell: Written) -> None:
        """Call `tell` on the loop once every record made so far is on disk (with the
        OSError that kept them off it), in the order asked, before the waiters resume."""
        self._told.append(tell)
        if not self._handing_over:
            self._handing_over = True
            hand_over_soon(self)

    def pending(self) -> bool:
        """Whether anything made is not known to be on disk yet."""
        return bool(self._pending or self._in_flight or self._unsynced)

    def take(self) -> Write | None:
        """What was made this turn, as one write to hand over (at most one a turn)."""
        self._handing_over = False
        chunks, waiters, told, close = self._pending, self._waiters, self._told, self._closing
        if not chunks and not waiters and not told and not close:
            return None
        self._pending, self._waiters, self._told, self._closing = [], [], [], False
        awaited = bool(waiters or told)
        self._records += len(chunks)
        self._bytes += sum(map(len, chunks))
        replace = self._rewrite or (
            bool(chunks)
            and (
                self._records > max(COMPACT_MIN, COMPACT_FACTOR * self._live_keys)
                or self._bytes > max(COMPACT_MIN_BYTES, COMPACT_FACTOR * self._live_bytes)
            )
        )
        if replace:  # the live set, made now: it holds every record taken
            self._rewrite = False
            data = b"".join(
                _packed("put", name, key, value)
                for name, live in self._live.items()
                for key, value in live.items()
            )
            self._records, self._bytes = self._live_keys, len(data)
            sync = self.sync
        else:
            data = b"".join(chunks)
            # what nobody waits for (discards alone) is written unsynced: the next awaited
            # write's sync covers it, as it covers the whole file
            sync = self.sync and (awaited or close) and (bool(chunks) or self._unsynced)
        self._unsynced = self.sync and not sync and (bool(chunks) or self._unsynced)
        self._in_flight += 1
        return Write(
            self._disk, data, sync, waiters, told, self._answered, replace=replace, close=close
        )

    def _answered(self, write: Write) -> None:
        self._in_flight -= 1
        if write.error is not None:
            LOG.error("journal.write_failed", path=str(self.path), error=str(write.error))
            # (the live set holds what it carried: whole, it puts the file right)
            self._rewrite = True

    async def close_journal(self) -> None:
        """A journal of this file is done: what is pending written (discards synced too);
        the file closed once all of them are (a later write opens it again)."""
        self._open_journals = max(0, self._open_journals - 1)
        if self._open_journals == 0:
            self._closing = True
        elif not self.pending():
            return
        waited = asyncio.ensure_future(self.wait())
        with contextlib.suppress(OSError):  # (logged as written)
            await asyncio.shield(waited)


class Journal:
    """One journal: a name in a `JournalFile` (`Journal(path)`: a file of its own)."""

    def __init__(self, file: JournalFile | Path, name: str = OWN, *, sync: bool = True) -> None:
        if isinstance(file, Path):
            file = JournalFile(file, sync=sync)
            file._open_journals += 1
        self.file = file
        self.name = name
        self._live = file.live(name)

    @property
    def path(self) -> Path:
        return self.file.path

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
        self.file.put(self.name, key, value)
        await self._wait()

    def put_soon(self, key: str, value: Any) -> None:
        """Record `key = value` without waiting: it goes with the file's next write, and
        is on disk once a write awaited after it returns (any journal's of the same file:
        one sync covers the whole file). For what goes with a record someone awaits next."""
        self.file.put(self.name, key, value)

    def on_disk(self, tell: Written) -> None:
        """Call `tell(error)` on the loop once every record made so far (of the file's
        journals) is on disk: what is told then, as nothing waits on the way."""
        self.file.on_disk(tell)

    async def drop(self, key: str) -> None:
        if key in self._live:
            self.file.drop(self.name, key)
            await self._wait()

    def discard(self, key: str) -> None:
        """Drop `key` without waiting for the record to reach the file: it goes with the
        next write, and is synced with the next write someone waits for. For what is
        harmless to forget late (an acknowledged update: after a crash before the sync
        it is re-sent, and acknowledged again), so that a batch of them is handled in one
        turn, not a turn each, and costs no sync of its own."""
        if key in self._live:
            self.file.drop(self.name, key)

    async def synced(self) -> None:
        """Returns once every record made so far is on disk (the discards too)."""
        if self.file.pending():
            await self._wait()

    async def _wait(self) -> None:
        await self.file.wait()

    async def close(self) -> None:
        """Write what is pending (synced); the file is closed once all its journals are
        (a later write opens it again)."""
        await self.file.close_journal()
