"""A big JSON answer written a piece at a time, the master's loop served between pieces.

Mesos's `/master/state` lists every slave and every task: at 50,000 slaves and 40,000
tasks it was 34 MB, built in one go in 11 s of the master's loop (nothing else handled
meanwhile: heartbeats, updates, offers). Here its long lists are `Lazy`: each item is
built when the writer reaches it, and every `ITEMS_A_TURN` items the writer sends what
it has and lets the loop go round. The answer is then read across some moments, not at
one: an item is built from the books as they are when it is reached (a slave removed
before it is left out by its list's own filter; a task is listed as it was when its
framework's list began).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Iterator
from typing import Any

from aiohttp import web

ITEMS_A_TURN = 200  # items of the lazy lists built between two turns of the loop
WRITE_BYTES = 1 << 20  # what is sent at most at once


class Lazy:
    """A JSON list whose items are built as it is written (an iterable of JSON values)."""

    def __init__(self, items: Iterable[Any]) -> None:
        self.items = items

    def __iter__(self) -> Iterator[Any]:  # (once: its items are built as they are read)
        return iter(self.items)


class _Turn:
    """Marks where the writer may let the loop go round."""


TURN = _Turn()


def pieces(value: Any) -> Iterator[str | _Turn]:
    """`value` as JSON text, in pieces, with TURN after every ITEMS_A_TURN lazy items."""
    built = 0

    def walk(v: Any) -> Iterator[str | _Turn]:
        nonlocal built
        if isinstance(v, Lazy):
            yield "["
            for i, item in enumerate(v.items):
                if i:
                    yield ", "
                yield from walk(item)
                built += 1
                if built % ITEMS_A_TURN == 0:
                    yield TURN
            yield "]"
        elif isinstance(v, dict) and any(_has_lazy(x) for x in v.values()):
            yield "{"
            for i, (key, item) in enumerate(v.items()):
                yield (", " if i else "") + json.dumps(key) + ": "
                yield from walk(item)
            yield "}"
        else:
            yield json.dumps(v)

    yield from walk(value)


def dumps(value: Any) -> str:
    """`value` as JSON text at once, its `Lazy` lists built now."""
    return "".join(p for p in pieces(value) if not isinstance(p, _Turn))


def eager(value: Any) -> Any:
    """`value` with its `Lazy` lists built now, as plain lists (for what must be read at
    one moment: the operator stream's SUBSCRIBED, before the events that follow it)."""
    if isinstance(value, Lazy):
        return [eager(item) for item in value.items]
    if isinstance(value, dict) and _has_lazy(value):
        return {key: eager(item) for key, item in value.items()}
    return value


def _has_lazy(v: Any) -> bool:
    return isinstance(v, Lazy) or (isinstance(v, dict) and any(_has_lazy(x) for x in v.values()))


async def stream_json(request: web.Request, body: Any) -> web.StreamResponse:
    """Answer `request` with `body` as JSON, its `Lazy` lists built as they are written."""
    response = web.StreamResponse(headers={"Content-Type": "application/json; charset=utf-8"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    buffer: list[str] = []
    size = 0
    for piece in pieces(body):
        if isinstance(piece, _Turn):
            if buffer:
                await response.write("".join(buffer).encode())
                buffer, size = [], 0
            await asyncio.sleep(0)  # (the loop's other work, between two runs of items)
            continue
        buffer.append(piece)
        size += len(piece)
        if size >= WRITE_BYTES:
            await response.write("".join(buffer).encode())
            buffer, size = [], 0
    await response.write("".join(buffer).encode())
    await response.write_eof()
    return response
