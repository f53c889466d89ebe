"""How the bus packs what was posted in one loop turn into few MQTT payloads: runs of one
kind that travels in lists (`LISTS`) as list messages, then batches of at most MAX_BATCH
messages, `most` bytes and MAX_PAYLOAD_ITEMS calls and list items (what a master reads
in one payload of a framework's: a callback that launches 100 tasks on each of 50 offers
made one payload of 5,000, refused whole), in the order posted; and `Outgoing`, one
payload on its way."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from protocol.wire.codec import MAX_BATCH, MAX_PAYLOAD_ITEMS, encode, encode_list
from protocol.wire.messages import Wire


@dataclass(slots=True, frozen=True)
class Counted:
    """An encoded message that counts for more than one call or list item (an Accept's
    tasks, a Reconcile's): how many, for the payload that takes it."""

    payload: bytes
    items: int


Posted = bytes | Counted | tuple[Wire, int]
"""A post waiting for its turn's flush: encoded (with its items, if more than one), or a
message and its epoch (see Bus.post)."""
Encoded = tuple[bytes, int]  # a message encoded, and the calls and list items it holds


@dataclass(slots=True)
class Outgoing:
    """One payload on its way to the broker; `done`, if someone awaits it."""

    topic: str
    payload: bytes
    qos: int
    retain: bool = False
    done: asyncio.Future[None] | None = None

    def succeed(self) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_result(None)

    def fail(self, error: BaseException) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(error)


def encoded(posted: list[Posted], inbox: str | None, most: int) -> list[Encoded]:
    """What was posted to one topic, encoded in order: each run of one kind that
    travels in lists (and one epoch) as list messages of at most MAX_BATCH items."""
    out: list[Encoded] = []
    run: list[Wire] = []
    run_epoch = 0
    for entry in posted:
        if not isinstance(entry, tuple):
            out.extend(listed(run, run_epoch, inbox, most))
            run = []
            out.append((entry, 1) if isinstance(entry, bytes) else (entry.payload, entry.items))
            continue
        message, epoch = entry
        if run and (
            type(message) is not type(run[0]) or epoch != run_epoch or len(run) == MAX_BATCH
        ):
            out.extend(listed(run, run_epoch, inbox, most))
            run = []
        run.append(message)
        run_epoch = epoch
    out.extend(listed(run, run_epoch, inbox, most))
    return out


def listed(run: list[Wire], epoch: int, inbox: str | None, most: int) -> list[Encoded]:
    if len(run) <= 1:
        return [(encode(message, inbox, epoch), 1) for message in run]
    data = encode_list(run, inbox, epoch)
    if len(data) <= most:
        return [(data, len(run))]
    half = len(run) // 2  # too big for one payload: in halves (each may go alone)
    return listed(run[:half], epoch, inbox, most) + listed(run[half:], epoch, inbox, most)


def chunked(payloads: list[Encoded], most: int) -> list[list[bytes]]:
    """The payloads in batches of at most MAX_BATCH messages, `most` bytes and
    MAX_PAYLOAD_ITEMS calls and list items, in order."""
    chunks: list[list[bytes]] = []
    chunk: list[bytes] = []
    size = items = 0
    for payload, count in payloads:
        if chunk and (
            len(chunk) == MAX_BATCH
            or size + len(payload) > most
            or items + count > MAX_PAYLOAD_ITEMS
        ):
            chunks.append(chunk)
            chunk, size, items = [], 0, 0
        chunk.append(payload)
        size += len(payload) + 8  # (msgpack's framing of each item, at most)
        items += count
    if chunk:  # (an empty list sends nothing)
        chunks.append(chunk)
    return chunks


def split(
    outbox: dict[tuple[str, int], list[Posted]], most: int
) -> tuple[dict[tuple[str, int], list[Posted]], dict[tuple[str, int], list[Posted]]]:
    """The first `most` posts of `outbox` (by topic, each topic's in order), and the rest."""
    now: dict[tuple[str, int], list[Posted]] = {}
    later: dict[tuple[str, int], list[Posted]] = {}
    for key, posted in outbox.items():
        if most <= 0:
            later[key] = posted
        elif len(posted) <= most:
            now[key], most = posted, most - len(posted)
        else:
            now[key], later[key], most = posted[:most], posted[most:], 0
    return now, later
