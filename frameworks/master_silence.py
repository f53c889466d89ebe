"""A master gone quiet under a subscribed framework.

The leading master sends each connected framework a heartbeat every
`heartbeat_interval_seconds` (its `Subscribed` says how often). A master stopped (Ctrl-C,
a crash, a machine gone) with no successor says nothing of it, and the broker, which is
still there, says nothing either: a framework heard neither offers nor updates, and said
nothing. Mesos's scheduler API has a framework count missed heartbeats and take the
master for lost after a few; so does this driver: at warning once MISSED intervals have
passed unheard (`framework.master_silent`), again every TELL_AGAIN while it lasts, and
once more when the master is heard again (`framework.master_heard`). It goes on
meanwhile: a master that comes back, or a new leader, has it subscribe again by itself.

While not subscribed (or the broker is away) it says nothing: the subscription's own wait
says `framework.waiting_for_master`, and the bus `bus.waiting_for_broker`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from protocol.transport.aio import within

MISSED = 3  # heartbeats missed in a row: the master is silent
TELL_AGAIN = 30.0  # seconds between warnings while it stays silent


class MasterSilence:
    """Heartbeats heard, and what is said when they stop."""

    def __init__(self, log: Callable[[], Any], cluster: str, connected: Callable[[], bool]):
        self._log = log  # (the driver's logger of the moment: it binds its framework id)
        self._cluster = cluster
        self._connected = connected  # the bus is up (else the bus says what is missing)
        self._interval: float | None = None  # the master's, while subscribed
        self._heard = 0.0
        self._told: float | None = None  # when the silence was last said, while it lasts
        self._changed = asyncio.Event()

    def subscribed(self, interval: float) -> None:
        """Subscribed to a master that sends a heartbeat every `interval` seconds."""
        self._interval = interval if interval > 0 else None
        self.heard()

    def unsubscribed(self) -> None:
        """Subscribing again: no watch until answered (a silence said is closed then)."""
        self._interval = None
        self._changed.set()

    def heard(self) -> None:
        """A heartbeat (or the subscription's answer) from the master."""
        now = _now()
        if self._told is not None:
            self._log().warning(
                "framework.master_heard",
                silent=round(now - self._heard, 1),
                detail="the master answers again",
            )
            self._told = None
        self._heard = now
        self._changed.set()

    async def run(self) -> None:
        """Until cancelled: watch for MISSED heartbeats in a row."""
        while True:
            self._changed.clear()
            interval = self._interval
            if interval is None:
                await self._changed.wait()
                continue
            with contextlib.suppress(TimeoutError):
                await within(self._changed.wait(), interval)
            if self._interval is None or not self._connected():
                continue
            now = _now()
            quiet = now - self._heard
            if quiet < MISSED * self._interval:
                continue
            if self._told is not None and now - self._told < TELL_AGAIN:
                continue
            self._told = now
            cluster = self._cluster
            self._log().warning(
                "framework.master_silent",
                silent=round(quiet, 1),
                heartbeat_interval=self._interval,
                detail=f"no heartbeat from the master for {quiet:.0f} s (it sends one every "
                f"{self._interval:g} s): has it stopped? Offers and task updates wait for "
                f"a master of cluster {cluster!r} (drfmesos master --cluster {cluster}); "
                "this framework subscribes again by itself when one answers",
            )


def _now() -> float:
    return asyncio.get_running_loop().time()
