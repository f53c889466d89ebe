"""A small durable key-value journal in the slave's work dir.

What a slave must not forget across a crash (status updates not yet acknowledged, the
tasks it runs) is written here before it acts on it. The journal is an append-only file
of msgpack records (`put key value` / `drop key`); loading replays it, and it is rewritten
from the live set when it has grown well past it.

Writes go to a worker thread in batches, so the event loop never blocks on the disk:
`await journal.put(...)` returns once the record is in the file (in the kernel's page
cache, which survives the process being killed; the machine losing power is beyond us).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack

COMPACT_FACTOR = 4
COMPACT_MIN = 1000


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._live: dict[str, Any] = {}
        self._records = 0
        self._queue: list[tuple[bytes, asyncio.Future[None]]] = []
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
        unpacker.feed(self.path.read_bytes())
        try:
            for record in unpacker:
                self._apply(record)
                self._records += 1
        except Exception:  # a torn last record (killed mid-write): keep what came before
            pass

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
        self._live[key] = value
        await self._append(["put", key, value])

    async def drop(self, key: str) -> None:
        if key in self._live:
            del self._live[key]
            await self._append(["drop", key])

    async def _append(self, record: list[Any]) -> None:
        await self._enqueue(msgpack.packb(record, use_bin_type=True))

    async def _enqueue(self, chunk: bytes) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((chunk, done))
        self._wake.set()
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_loop(), name=f"journal-{self.path}")
        await done

    async def _write_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._queue = self._queue, []
            if not batch:
                continue
            try:
                snapshot = None
                self._records += len(batch)
                if self._records > max(COMPACT_MIN, COMPACT_FACTOR * len(self._live)):
                    snapshot = [["put", k, v] for k, v in self._live.items()]
                    self._records = len(snapshot)
                await asyncio.to_thread(self._write, [b for b, _ in batch], snapshot)
            except Exception as e:
                for _, done in batch:
                    if not done.done():
                        done.set_exception(e)
                continue
            for _, done in batch:
                if not done.done():
                    done.set_result(None)

    def _write(self, chunks: list[bytes], snapshot: list[list[Any]] | None) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if snapshot is not None:
            tmp = self.path.with_suffix(".compact")
            with open(tmp, "wb") as f:
                for record in snapshot:
                    f.write(msgpack.packb(record, use_bin_type=True))
            os.replace(tmp, self.path)  # the live set already includes this batch
            return
        with open(self.path, "ab") as f:
            f.write(b"".join(chunks))

    async def close(self) -> None:
        if self._writer is not None:
            await self._enqueue(b"")  # resolves once everything queued before it is written
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
            self._writer = None
