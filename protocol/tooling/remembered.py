"""Answers remembered for a while, and boundedly: a slow check's verdict (a password's
PBKDF2, some 10 ms on purpose) asked again within its time is answered from memory. The
embedded broker's plugin and the master's HTTP side both keep their verdicts here. And
ids remembered boundedly, the oldest forgotten first (`keep_newest`)."""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Generic, TypeVar

T = TypeVar("T")


class Remembered(Generic[T]):
    def __init__(self, most: int | None = None) -> None:
        """`most`: answers kept at most, the oldest forgotten first (None: no bound)."""
        self._most = most
        self._kept: OrderedDict[bytes, tuple[T, float]] = OrderedDict()  # key: (it, until)

    def get(self, key: bytes, now: float) -> T | None:
        """The answer, if one is remembered for `key` and its time has not passed."""
        kept = self._kept.get(key)
        return kept[0] if kept is not None and kept[1] > now else None

    def put(self, key: bytes, answer: T, seconds: float) -> None:
        """Remember `answer` for `seconds` from now, as the newest."""
        self._kept.pop(key, None)
        self._kept[key] = (answer, time.monotonic() + seconds)
        if self._most is not None:
            while len(self._kept) > self._most:
                self._kept.popitem(last=False)

    def clear(self) -> None:
        self._kept.clear()


def keep_newest(kept: dict[str, None], item: str, most: int) -> list[str]:
    """Remember `item` in `kept` (oldest first) as its newest; the oldest past `most`,
    forgotten, to forget elsewhere too."""
    kept.pop(item, None)
    kept[item] = None
    forget = []
    while len(kept) > most:
        oldest = next(iter(kept))
        del kept[oldest]
        forget.append(oldest)
    return forget
