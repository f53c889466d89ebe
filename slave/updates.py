"""A slave's status updates until they are acknowledged: each is written to the work dir
before it is sent, and sent again with backoff -- across reconnects and restarts -- until
the master acknowledges it (Mesos's status update manager, agent side).

The master forwards each update to its framework and acknowledges it here once the
framework has acknowledged it (or when the framework will never hear it: it heard the
task end already), so an update is owed until its framework has it.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from protocol.journal import Journal
from protocol.transport.base import Transport
from protocol.wire.messages import EndingTask, StatusUpdate, TaskState

MAX_RESEND_BACKOFF = 30.0
RESEND_CHECK = 0.2  # seconds between looks for updates due again


class OwedUpdates:
    def __init__(self, bus: Transport, to_master: str, path: Path, resend_after: float) -> None:
        self.bus = bus
        self.to_master = to_master
        self.resend_after = resend_after  # first re-send of an unacknowledged update
        self.journal = Journal(path)
        self._resend_at: dict[str, tuple[float, float]] = {}  # uuid -> (when, backoff)

    def __len__(self) -> int:
        return len(self.journal)

    def send_all_soon(self) -> None:
        """Every owed update goes again at the next look once registered (after an
        announcement, and what a previous run of this slave still owed)."""
        for uuid, _ in self.journal.items():
            self._resend_at[uuid] = (0.0, self.resend_after)

    async def send(self, update: StatusUpdate) -> None:
        """Write the update down, then send it (it is owed until acknowledged)."""
        uuid = update.status.uuid or ""
        await self.journal.put(uuid, update.model_dump(mode="python"))
        self._resend_at[uuid] = (time.monotonic() + self.resend_after, self.resend_after)
        self.bus.post(self.to_master, update)

    def acknowledged(self, uuid: str) -> None:
        self._resend_at.pop(uuid, None)
        self.journal.discard(uuid)  # (not awaited: a batch of acks is one turn)

    def ending(self) -> list[EndingTask]:
        """The tasks whose end the master has not acknowledged yet (a re-registering
        slave names them, so that the master does not count them as lost)."""
        return [
            EndingTask(framework_id=raw["framework_id"], task_id=raw["status"]["task_id"])
            for _, raw in self.journal.items()
            if TaskState(raw["status"]["state"]).terminal
        ]

    async def forget_framework(self, framework_id: str) -> None:
        """The framework is gone: nothing more is owed to it."""
        for uuid, raw in self.journal.items():
            if raw.get("framework_id") == framework_id:
                await self.journal.drop(uuid)
                self._resend_at.pop(uuid, None)

    def resend_due(self, now: float) -> None:
        """Send again what is due, each next time after twice its last wait (at most
        MAX_RESEND_BACKOFF)."""
        for uuid, (when, backoff) in list(self._resend_at.items()):
            if when > now:
                continue
            raw = self.journal.get(uuid)
            if raw is None:
                self._resend_at.pop(uuid, None)
                continue
            self.bus.post(self.to_master, StatusUpdate.model_validate(raw))
            nxt = min(backoff * 2, MAX_RESEND_BACKOFF)
            self._resend_at[uuid] = (now + nxt, nxt)

    async def resend_loop(self, registered: asyncio.Event) -> None:
        """Re-send what is due while registered (an unregistered slave's updates would be
        refused: they go again after it registers)."""
        while True:
            await asyncio.sleep(RESEND_CHECK)
            if registered.is_set():
                self.resend_due(time.monotonic())

    async def close(self) -> None:
        await self.journal.close()
