"""The master's allocation rounds: one every allocation interval, and soon after a free;
each asks the offer cycle (master.cycle) what to offer, books the offers and sends them,
a framework's offers in messages of at most MAX_OFFERS_PER_MESSAGE."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict

from prometheus_client import Histogram

from master.books import OfferRecord
from master.cycle import offer_bound
from master.shell import MasterShell
from protocol.transport.aio import within
from protocol.wire.messages import MAX_OFFERS_PER_MESSAGE, Offer, Offers, new_id


class Rounds:
    """The round loop, constructed with the shell whose books and allocator it uses."""

    def __init__(self, shell: MasterShell) -> None:
        self.shell = shell
        self.count = 0  # allocation rounds run
        self.duration = Histogram(
            "drfmesos_allocation_round_seconds",
            "How long an allocation round takes.",
            buckets=(1e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1, 0.5, 1.0),
            registry=None,  # the master's own registry (master.http.metrics) collects it
        )

    async def loop(self) -> None:
        """A round every allocation interval, and soon after a free (frees within
        `round_batch` share one). Each visits only the slaves that may have something
        new to offer (see Allocator.allocate)."""
        interval = self.shell.config.allocation_interval
        loop = asyncio.get_running_loop()
        next_full = loop.time() + interval
        while True:
            with contextlib.suppress(TimeoutError):
                await within(self.shell.round_wanted.wait(), max(0.0, next_full - loop.time()))
            if self.shell.round_wanted.is_set() and self.shell.config.round_batch > 0:
                await asyncio.sleep(self.shell.config.round_batch)  # let a burst of frees land
            self.shell.round_wanted.clear()
            if loop.time() >= next_full:
                next_full = loop.time() + interval
            try:
                self.run_one()
            except Exception:
                self.shell.log.exception("round.failed")

    def run_one(self) -> None:
        now = self.shell.now()
        started = time.perf_counter()
        plan = self.shell.cycle.round(now)
        self.count += 1
        self.duration.observe(time.perf_counter() - started)
        if plan.held_back:  # (a framework at MAX_OFFERS_HELD: those went back, filtered)
            self.shell.log.info(
                "offers.held_back", offers=len(plan.held_back), bound=offer_bound.MAX_OFFERS_HELD
            )
        allocations = plan.offers
        if not allocations:
            return
        by_framework: dict[str, list[Offer]] = defaultdict(list)
        for a in allocations:
            fw = self.shell.books.frameworks[a.framework_id]
            slave = self.shell.books.slaves[a.slave_id]
            offer_id = f"o-{new_id()[:20]}"
            record = OfferRecord(offer_id, a.framework_id, a.slave_id, a.resources, now)
            self.shell.books.offers[offer_id] = record
            fw.offers.add(offer_id)
            slave.offers.add(offer_id)
            by_framework[a.framework_id].append(
                Offer(
                    offer_id=offer_id,
                    framework_id=a.framework_id,
                    slave_id=a.slave_id,
                    hostname=slave.hostname,
                    resources=a.resources,
                    attributes=slave.attributes,
                )
            )
            self.shell.emit_event(
                "offer",
                framework_id=a.framework_id,
                slave_id=a.slave_id,
                offer_id=offer_id,
                resources=a.resources,
            )
        for framework_id, offers in by_framework.items():
            fw, most = self.shell.books.frameworks[framework_id], MAX_OFFERS_PER_MESSAGE
            for start in range(0, len(offers), most):
                self.shell.send_framework(fw, Offers(offers=offers[start : start + most]))
        self.shell.log.debug("round.done", offers=len(allocations), frameworks=len(by_framework))
