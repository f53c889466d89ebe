"""A disk slow to sync, for the journal's tests: os.fdatasync held until released."""

from __future__ import annotations

import os
import threading

import pytest


class HeldSync:
    """os.fdatasync, while `hold` is set (from the start unless `holding=False`), held
    until `release` is set; `started` once a held sync began; `calls` counts them all."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, holding: bool = True) -> None:
        self.hold, self.started, self.release = (
            threading.Event(),
            threading.Event(),
            threading.Event(),
        )
        if holding:
            self.hold.set()
        self.calls = 0
        real = os.fdatasync

        def held(fd: int) -> None:
            self.calls += 1
            if self.hold.is_set():
                self.started.set()
                self.release.wait(10)
            real(fd)

        monkeypatch.setattr(os, "fdatasync", held)
