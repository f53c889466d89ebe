"""What ports on every slave cost an allocation round (issue 49: at most 1.3x a round of
scalars only): N slaves by M frameworks, every slave with `ports:[31000-32000]` beside its
cpus and mem, and the same cluster without ports, in turn.

A round here is what the master's round does with the books: `Allocator.allocate` (ports
counted by their size, as DRF counts them), then each offer booked with its concrete
ports (`master.slave_values.for_offer`, as `master.offers.OfferBook.make` calls it: the
lowest free ports of the slave, read from its tasks and offers). Each round's offers are
then given back unfiltered, so every round does the same work. The two kinds of round
are interleaved (scalars, ranges, again and again: a shared machine slows both alike);
the figure is the median of each ranges round over the scalars round just before it.

    python -m benchmarks.allocator   (prints it beside the other rounds)
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass

from benchmarks.common import table
from master.allocation.allocator import Allocator
from master.books import Books, OfferRecord, Slave
from master.slave_values import for_offer
from protocol.wire.discrete import DEFAULT_PORTS, EMPTY, Discrete, Ranges, with_counts
from protocol.wire.resources import Resources

SLAVE = Resources(cpus=24, mem=4096)
PORTS = Discrete({"ports": Ranges.parse(DEFAULT_PORTS)})
BOUND = 1.3  # a round with ports on every slave, at most this many scalar rounds


class Cluster:
    """An allocator and the master's books of one cluster, with or without ports."""

    def __init__(self, n_slaves: int, n_frameworks: int, ports: bool) -> None:
        values = PORTS if ports else EMPTY
        total = with_counts(SLAVE, values, "slave")
        self.allocator = Allocator("drf")
        self.books = Books()
        for i in range(n_frameworks):
            self.allocator.add_framework(f"framework-{i}", role=f"role-{i}")
        for i in range(n_slaves):
            sid = f"slave-{i}"
            slave = Slave(sid, "p", sid, total, {}, "", 0.0)
            slave.discrete = values
            self.books.slaves[sid] = slave
            self.allocator.add_slave(sid, total)

    def round(self, now: float) -> tuple[float, int]:
        """One round and its offers booked, timed; then every offer given back."""
        books = self.books
        gc.collect()
        start = time.perf_counter()
        allocations = self.allocator.allocate(now, full=True)
        for i, a in enumerate(allocations):
            slave = books.slaves[a.slave_id]
            values = for_offer(books, slave, a.resources.millis)
            offer_id = f"o{i}"
            books.offers[offer_id] = OfferRecord(
                offer_id, a.framework_id, a.slave_id, a.resources, now, values
            )
            slave.offers.add(offer_id)
        spent = time.perf_counter() - start
        for i, a in enumerate(allocations):
            books.slaves[a.slave_id].offers.discard(f"o{i}")
            self.allocator.recover(a.framework_id, a.slave_id, a.resources)
        books.offers.clear()
        return spent, len(allocations)


@dataclass(frozen=True)
class RangesCost:
    """Rounds with ports and without, and the figure with its bound."""

    slaves: int
    frameworks: int
    scalars_ms: list[float]
    ranges_ms: list[float]
    offers: int
    ratio: float  # median of each ranges round over the scalars round before it

    @property
    def figure(self) -> str:
        return f"round with ports on every slave, {self.slaves:,} x {self.frameworks:,}"

    def table(self) -> str:
        rows = [
            ["scalars only (cpus, mem)", statistics.median(self.scalars_ms), 1.0],
            ["ports:[31000-32000] too", statistics.median(self.ranges_ms), self.ratio],
        ]
        return table(["slaves' resources", "round ms (median)", "x scalars"], rows)


def report(quick: bool) -> RangesCost:
    n, m, repeats = (2000, 200, 3) if quick else (10_000, 1000, 5)
    scalars, ranges = Cluster(n, m, ports=False), Cluster(n, m, ports=True)
    scalars.round(0.0)  # (the first round from empty warms the books up)
    ranges.round(0.0)
    s_times: list[float] = []
    r_times: list[float] = []
    offers = 0
    for i in range(1, repeats + 1):
        s_times.append(scalars.round(float(i))[0])
        spent, offers = ranges.round(float(i))
        r_times.append(spent)
    ratio = statistics.median(r / s for r, s in zip(r_times, s_times, strict=True))
    return RangesCost(n, m, [t * 1e3 for t in s_times], [t * 1e3 for t in r_times], offers, ratio)
