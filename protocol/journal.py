"""A small durable key-value journal in a work dir (a slave's tasks and updates, a lone
master's registry).

What a party must not forget across a crash (status updates not yet acknowledged, the
tasks it runs) is written here before it acts on it. The journal is an append-only file
of msgpack records (`put key value` / `drop key`); loading replays it, and it is rewritten
from the live set when it has grown well past it.

`await journal.put(...)` returns once the record is on disk: every write is followed by
an `fdatasync`, so what a party acknowledged (a registered slave or framework, an owed
status update) survives the machine losing power, as Mesos's replicated log does; this
costs about 0.15 ms a write on an ext4 virtual disk, and the fdatasync is shared by all
the records of a turn. `Journal(path, sync=False)` leaves records in the kernel's page
cache (which survives the process being killed, not the machine) for what is cheap to
lose. The first record of a turn of the event loop is written at once, the others of
that turn together, by one `write` on the loop itself, at its end. An append of a few
hundred bytes costs a few microseconds; handing it to a worker thread, as this did
before, cost far more (the slave spent most of its time at 1,000 tasks/s waking
threads).

A record torn by a kill in the middle of a write is cut off when the journal is loaded
(and logged), so that what is appended after it can be read back.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack

from protocol import logs

LOG = logs.get("journal")

COMPACT_FACTOR = 4
COMPACT_MIN = 1000


class Journal:
    def __init__(self, path: Path, *, sync: bool = True) -> None:
        self.path = path
        self.sync = sync  # fdatasync after every write (see the module's docstring)
        self._live: dict[str, Any] = {}
        self._records = 0
        self._pending: list[bytes] = []  # records made this turn, written at its end
        self._turn_open = False  # a record was written this turn: the rest wait for its end
        # one future per caller waiting for the turn's write: a caller cancelled while it
        # waits then cancels only its own, not the others' (as asyncio's own locks do)
        self._waiters: list[asyncio.Future[None]] = []
        self._fd: int | None = None  # kept open between writes; closed by close()
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
        unpacker.feed(data)
        whole = 0  # bytes up to the end of the last whole record
        try:
            for record in unpacker:
                self._apply(record)
                self._records += 1
                whole = unpacker.tell()
        except Exception:  # not msgpack at all past this point: keep what came before
            pass
        if whole < len(data):
            self._truncate(whole, len(data))

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

    def _apply(self, record: Any) -> None:
        if not isinstance(record, list) or not record:
            return
        if record[0] == "put" and len(record) == 3:
            self._live[record[1]] = record[2]
        elif record[0] == "drop" and len(record) == 2:
            self._live.pop(record[1], None)

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
        """Record `key = value`; returns once it is in the file.

        Records are written in the order they are made: the first of a turn of the loop
        at once, the others of that turn together at its end.
        """
        self._live[key] = value
        await self._append(["put", key, value])

    async def drop(self, key: str) -> None:
        if key in self._live:
            del self._live[key]
            await self._append(["drop", key])

    def discard(self, key: str) -> None:
        """Drop `key` without waiting for the record to reach the file: it goes with the
        turn's others. For what is harmless to forget late (an acknowledged update: after
        a crash before the write it is re-sent, and acknowledged again), so that a batch
        of them is handled in one turn, not a turn each."""
        if key in self._live:
            del self._live[key]
            self._add(msgpack.packb(["drop", key], use_bin_type=True))

    async def _append(self, record: list[Any]) -> None:
        if self._add(msgpack.packb(record, use_bin_type=True)):
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        await waiter

    def _add(self, chunk: bytes) -> bool:
        """The first record of a turn is written now (True: it is in the file); the rest
        of the turn's share one write at its end (a lone update does not wait a turn)."""
        if not self._turn_open:
            self._turn_open = True
            asyncio.get_running_loop().call_soon(self._flush)
            if (error := self._write_chunks([chunk])) is not None:
                raise error
            return True
        self._pending.append(chunk)
        return False

    def _flush(self) -> None:
        self._turn_open = False
        chunks, self._pending = self._pending, []
        waiters, self._waiters = self._waiters, []
        if not chunks:
            return
        error = self._write_chunks(chunks)  # (with only discards nobody waits; it was logged)
        for waiter in waiters:
            if waiter.done():  # its caller was cancelled: the record is written all the same
                continue
            if error is not None:
                waiter.set_exception(error)
            else:
                waiter.set_result(None)

    def _write_chunks(self, chunks: list[bytes]) -> OSError | None:
        try:
            self._records += len(chunks)
            if self._records > max(COMPACT_MIN, COMPACT_FACTOR * len(self._live)):
                self._compact()  # the live set already includes these records
            else:
                self._write(b"".join(chunks))
        except OSError as e:
            LOG.error("journal.write_failed", path=str(self.path), error=str(e))
            return e
        return None

    def _write(self, data: bytes) -> None:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        view = memoryview(data)
        while view:  # a regular file takes it in one write; a short one is finished here
            view = view[os.write(self._fd, view) :]
        if self.sync:
            os.fdatasync(self._fd)

    def _compact(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".compact")
        with open(tmp, "wb") as f:
            for key, value in self._live.items():
                f.write(msgpack.packb(["put", key, value], use_bin_type=True))
            if self.sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, self.path)
        if self.sync:  # the rename itself is in the directory
            _fsync_dir(self.path.parent)
        self._records = len(self._live)
        self._close_fd()  # the next append opens the new file

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    async def close(self) -> None:
        """Write what is pending and close the file (a later write opens it again)."""
        if self._pending:  # the turn's records, whether or not anyone waits for them
            self._flush()
        self._close_fd()


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
