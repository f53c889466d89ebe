"""A master gone quiet under a party registered with it: a framework or a slave.

The leading master sends each connected framework a heartbeat every
`heartbeat_interval_seconds` (its `Subscribed` says how often), and the same interval
(its `Registered` says it) one on its leader topic, which every slave process reads. A
master stopped (Ctrl-C, a crash, a machine gone) with no successor says nothing of it,
and the broker, which is still there, says nothing either: a framework heard neither
offers nor updates, a slave nothing at all, and neither said anything. Mesos's scheduler
API has a framework count missed heartbeats and take the master for lost after a few,
and a Mesos agent its master's pings (agent ping timeout); so does each party here: at
warning once MISSED intervals have passed unheard (`framework.master_silent`,
`slave.master_silent`), again every TELL_AGAIN while it lasts, and once more when the
master is heard again (`<party>.master_heard`). It goes on meanwhile: a master that comes
back, or a new leader, has it subscribe or register again by itself.

While not subscribed or registered (or the broker is away) it says nothing: the wait for
a master says so itself (`framework.waiting_for_master`, `slave.waiting_for_master`), and
the bus `bus.waiting_for_broker`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocol.transport.aio import within


@dataclass(frozen=True, slots=True)
class Party:
    """What a party says of its master's silence: its two events, and in the silence's
    detail what waits and what it does by itself."""

    silent: str
    heard: str
    waiting: str
    again: str


FRAMEWORK = Party(
    "framework.master_silent",
    "framework.master_heard",
    "Offers and task updates wait",
    "this framework subscribes again by itself when one answers",
)
SLAVE = Party(
    "slave.master_silent",
    "slave.master_heard",
    "Its tasks run on; their updates and new tasks wait",
    "this slave registers again by itself when one answers",
)

MISSED = 3  # heartbeats missed in a row: the master is silent
TELL_AGAIN = 30.0  # seconds between warnings while it stays silent


class MasterSilence:
    """Heartbeats heard, and what is said when they stop."""

    def __init__(
        self,
        log: Callable[[], Any],
        cluster: str,
        connected: Callable[[], bool],
        party: Party,
    ):
        self._log = log  # (the party's logger of the moment: a driver's binds its id)
        self._cluster = cluster
        self._connected = connected  # the bus is up (else the bus says what is missing)
        self._party = party
        self._interval: float | None = None  # the master's, while subscribed
        self._heard = 0.0
        self._told: float | None = None  # when the silence was last said, while it lasts
        self._changed = asyncio.Event()

    @property
    def interval(self) -> float | None:
        """The master's heartbeat interval while subscribed (None: not watching)."""
        return self._interval

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
                self._party.heard,
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
                self._party.silent,
                silent=round(quiet, 1),
                heartbeat_interval=self._interval,
                detail=f"no heartbeat from the master for {quiet:.0f} s (it sends one every "
                f"{self._interval:g} s): has it stopped? {self._party.waiting} for a master "
                f"of cluster {cluster!r} (drfmesos master --cluster {cluster}); "
                f"{self._party.again}",
            )


def _now() -> float:
    return asyncio.get_running_loop().time()
