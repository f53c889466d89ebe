"""The master's allocation rounds: one every allocation interval, and soon after a free;
each asks the offer cycle (master.cycle) what to offer, and the offer book books and
sends it (master.offers)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from prometheus_client import Histogram

from master.cycle import OfferCycle, offer_bound
from master.offers import OfferBook
from protocol.transport.aio import loop_time, within


class Rounds:
    """The round loop, and the wish for a round soon (`request`)."""

    def __init__(
        self,
        cycle: OfferCycle,
        offers: OfferBook,
        log: Any,
        *,
        interval: float,
        batch: float,
    ) -> None:
        """`interval`: seconds between rounds; `batch`: frees within this share one."""
        self.cycle, self.offers, self.log = cycle, offers, log
        self.interval, self.batch = interval, batch
        self._wanted = asyncio.Event()
        self.count = 0  # allocation rounds run
        self.duration = Histogram(
            "drfmesos_allocation_round_seconds",
            "How long an allocation round takes.",
            buckets=(1e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1, 0.5, 1.0),
            registry=None,  # the master's own registry (master.http.metrics) collects it
        )

    def request(self) -> None:
        """Ask for an allocation round soon (frees within `batch` share one)."""
        self._wanted.set()

    @property
    def requested(self) -> bool:
        """Whether a round is asked for and has not run yet (it is cleared as the round
        starts, in the same turn)."""
        return self._wanted.is_set()

    async def loop(self) -> None:
        """A round every allocation interval, and soon after a free (frees within
        `batch` share one). Each visits only the slaves that may have something new to
        offer (see Allocator.allocate)."""
        loop = asyncio.get_running_loop()
        next_full = loop.time() + self.interval
        while True:
            with contextlib.suppress(TimeoutError):
                await within(self._wanted.wait(), max(0.0, next_full - loop.time()))
            if self._wanted.is_set() and self.batch > 0:
                await asyncio.sleep(self.batch)  # let a burst of frees land
            self._wanted.clear()
            if loop.time() >= next_full:
                next_full = loop.time() + self.interval
            try:
                self.run_one()
            except Exception:
                self.log.exception("round.failed")

    def run_one(self) -> None:
        now = loop_time()
        started = time.perf_counter()
        plan = self.cycle.round(now)
        self.count += 1
        self.duration.observe(time.perf_counter() - started)
        if plan.held_back:  # (a framework at MAX_OFFERS_HELD: those went back, filtered)
            self.log.info(
                "offers.held_back", offers=len(plan.held_back), bound=offer_bound.MAX_OFFERS_HELD
            )
        if plan.offers:
            frameworks = self.offers.make(plan.offers, now)
            self.log.debug("round.done", offers=len(plan.offers), frameworks=frameworks)
