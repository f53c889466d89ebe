"""What keeping the reasons costs an allocation round (issue 47: at most 10%), and what
asking costs: an offer cycle's round over N slaves by M frameworks with the recent
rounds' offers recorded (`master.cycle.offer_log`, as the master runs) and without, best
of several fresh runs each, in one run; then one `why` answer on the same books.

    python -m benchmarks.allocator   (prints it beside the other rounds)
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Iterator
from dataclasses import replace

from benchmarks.common import bounds, table
from master.allocation.allocator import Allocator
from master.allocation.planning import RunningTask
from master.cycle import CycleConfig, OfferCycle, Outstanding, Wish
from protocol.wire.resources import Resources

SLAVE = Resources(cpus=24, mem=4096)
BOUND = 0.10  # recording may cost a round this much at most


class _NoBooks:
    """Nothing outstanding, nothing running: the round alone (`master.cycle.State`)."""

    def __init__(self, frameworks: list[str]) -> None:
        self.frameworks = frameworks

    def offers_held(self) -> dict[str, int]:
        return {}

    def outstanding(self) -> Iterator[Outstanding]:
        return iter(())

    def wishes(self, now: float) -> Iterator[Wish]:
        return (Wish(f, f) for f in self.frameworks)

    def running(self) -> Iterator[RunningTask]:
        return iter(())

    def task_live(self, framework_id: str, task_id: str) -> bool:
        return False


def _cycle(n_slaves: int, n_frameworks: int, record: bool) -> OfferCycle:
    allocator = Allocator("drf")
    names = [f"framework-{i}" for i in range(n_frameworks)]
    for name in names:
        allocator.add_framework(name, role=name)
    for i in range(n_slaves):
        allocator.add_slave(f"slave-{i}", SLAVE)
    return OfferCycle(allocator, _NoBooks(names), replace(CycleConfig(), record_offers=record))


def _two_rounds(cycle: OfferCycle) -> float:
    """A round from empty, every offer declined (5 s filter), and the round after."""
    spent = 0.0
    for now in (0.0, 1.0):
        gc.collect()
        start = time.perf_counter()
        offers = cycle.round(now).offers
        spent += time.perf_counter() - start
        for a in offers:
            cycle.decline(a.framework_id, a.slave_id, a.resources, 5.0, now)
    return spent


def measure(n_slaves: int, n_frameworks: int, repeats: int) -> tuple[float, float, float]:
    """(rounds without recording, with it, one `why` answer), seconds, best of `repeats`
    (interleaved: a shared machine's load falls on both alike)."""
    without = with_ = asked = math.inf
    for _ in range(repeats):
        without = min(without, _two_rounds(_cycle(n_slaves, n_frameworks, record=False)))
        cycle = _cycle(n_slaves, n_frameworks, record=True)
        with_ = min(with_, _two_rounds(cycle))
        start = time.perf_counter()
        cycle.why("framework-0", 2.0)
        asked = min(asked, time.perf_counter() - start)
    return without, with_, asked


def report(quick: bool) -> tuple[list[list[object]], list[tuple[str, str, str, bool]]]:
    """The table's rows and the bound's row, for `benchmarks.allocator`."""
    n, m = (1000, 100) if quick else (10_000, 1000)
    without, with_, asked = measure(n, m, repeats=3 if quick else 5)
    cost = with_ / without - 1
    rows: list[list[object]] = [[f"{n:,} x {m:,}", without * 1e3, with_ * 1e3, asked * 1e3]]
    bound = (
        f"recording why, {n:,} x {m:,} (two rounds)",
        f"{cost:+.1%} ({without * 1e3:.0f} ms -> {with_ * 1e3:.0f} ms)",
        f"<= +{BOUND:.0%}",
        cost <= BOUND,
    )
    return rows, [bound]


def main(quick: bool) -> None:
    rows, bound = report(quick)
    print("an offer cycle's rounds with the recent offers recorded (for why) and without")
    print(table(["slaves x frameworks", "without ms", "with ms", "one why ms"], rows))
    print(bounds(bound))


__all__ = ["BOUND", "main", "measure", "report"]
