"""A tenant framework on a secured cluster, and what the tenant tests measure of it: logs
written, files outside, counts alike."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from frameworks.driver import SchedulerDriver
from frameworks.scheduler import Driver, Scheduler
from protocol import logs
from protocol.wire.messages import (
    Offer,
    TaskStatus,
)
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.trust import Secure, T


@contextlib.asynccontextmanager
async def tenant(
    sec: Secure, failover: float = 0.0
) -> AsyncIterator[tuple[SchedulerDriver, Tenant]]:
    """mallory, subscribed through the real SDK driver with its own credentials; with a
    `failover` timeout its framework outlives the driver."""
    scheduler = Tenant()
    driver = SchedulerDriver(
        scheduler,
        name="mallory",
        broker=sec.connect("mallory"),
        cluster=T.cluster,
        role="mallory",
        failover_timeout=failover,
    )
    await driver.start()
    try:
        yield driver, scheduler
    finally:
        driver.stop(failover=bool(failover))
        await driver._close()


def files_outside(root: Path, work_dirs: list[Path]) -> list[Path]:
    """What is under `root` but not under `work_dirs` (nor the credentials store), and
    whatever exists where the hostile ids pointed."""
    outside = [
        p
        for p in root.rglob("*")
        if not any(p == w or p.is_relative_to(w) for w in [*work_dirs, root / "auth"])
    ]
    aimed_at = [*root.parent.glob("escaped*"), Path("/tmp/absolute")]
    return outside + [p for p in aimed_at if p.exists()]


def counted_alike(sec: Secure) -> bool:
    """Every slave runs within its total, and runs what the master's books count there:
    its tasks and its executors, no more and no less."""
    for sid, slave in sec.slaves.items():
        booked = Resources()
        for fw in sec.master.books.frameworks.values():
            booked = sum((t.resources for t in fw.tasks.values() if t.slave_id == sid), booked)
            booked = sum((r for (s, _), r in fw.executors.items() if s == sid), booked)
        used = slave.used()
        if not slave.config.resources.contains(used) or used != booked:
            return False
    return True


@contextlib.contextmanager
def log_written() -> Iterator[io.StringIO]:
    """Every log line written meanwhile, structlog's and the standard library's alike."""
    written = io.StringIO()
    logs.configure("warning", json=True, stream=written)
    handler = logging.StreamHandler(written)
    logging.getLogger().addHandler(handler)
    try:
        yield written
    finally:
        logging.getLogger().removeHandler(handler)
        logs.configure("warning", json=True)  # as conftest has it


class Tenant(Scheduler):
    """Keeps its offers for the test to use, and every status it hears."""

    def __init__(self) -> None:
        self.offers: list[Offer] = []
        self.statuses: list[TaskStatus] = []
        self.changed = asyncio.Event()

    async def resource_offers(self, driver: Driver, offers: list[Offer]) -> None:
        self.offers += offers
        self.changed.set()

    async def offer_rescinded(self, driver: Driver, offer_id: str) -> None:
        self.offers[:] = [o for o in self.offers if o.offer_id != offer_id]

    async def status_update(self, driver: Driver, status: TaskStatus) -> None:
        self.statuses.append(status)
        self.changed.set()

    def last(self, task_id: str) -> TaskStatus | None:
        return next((s for s in reversed(self.statuses) if s.task_id == task_id), None)

    def ended(self, task_id: str) -> bool:
        last = self.last(task_id)
        return last is not None and last.state.terminal

    async def offer(self) -> Offer:
        await eventually(lambda: bool(self.offers), timeout=10)
        return self.offers.pop(0)
