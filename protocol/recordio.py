"""Mesos's RecordIO framing: each record is its length in bytes, in decimal ASCII, a
newline, then the bytes (`12\\n{"type":...}`). Mesos's v1 HTTP APIs stream their events
this way; a reader cannot rely on chunk boundaries, so the decoder is incremental.
"""

from __future__ import annotations

import json
from typing import Any

MAX_RECORD = 64 * 1024 * 1024
"""A record longer than this is refused by the decoder (a corrupt or hostile length)."""
_MAX_DIGITS = len(str(MAX_RECORD))


class RecordIOError(ValueError):
    """The stream is not RecordIO: a bad length prefix, or a record over MAX_RECORD."""


def encode(record: bytes) -> bytes:
    """One record, framed."""
    return b"%d\n%s" % (len(record), record)


def json_record(event: dict[str, Any]) -> bytes:
    """One event as a record of single-line JSON, as Mesos's streams carry them (clients
    that split on newlines read one event per line)."""
    return encode(json.dumps(event, separators=(",", ":")).encode())


class Decoder:
    """Feed it bytes as they arrive; it returns the records they complete, in order."""

    def __init__(self, max_record: int = MAX_RECORD) -> None:
        self._buffer = bytearray()
        self._max = max_record

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        records: list[bytes] = []
        while True:
            newline = self._buffer.find(b"\n", 0, _MAX_DIGITS + 1)
            if newline < 0:
                if len(self._buffer) > _MAX_DIGITS:
                    raise RecordIOError("no record length in the first bytes")
                return records
            prefix = bytes(self._buffer[:newline])
            if not prefix.isdigit():
                raise RecordIOError(f"bad record length {prefix[:20]!r}")
            length = int(prefix)
            if length > self._max:
                raise RecordIOError(f"record of {length} bytes is over {self._max}")
            end = newline + 1 + length
            if len(self._buffer) < end:
                return records
            records.append(bytes(self._buffer[newline + 1 : end]))
            del self._buffer[:end]

    @property
    def pending(self) -> int:
        """Bytes received that do not yet make a whole record."""
        return len(self._buffer)
