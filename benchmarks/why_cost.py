"""What keeping the reasons costs an allocation round (issue 47: at most 10%), and what
asking costs: an offer cycle's round over N slaves by M frameworks with the recent
rounds' offers recorded (`master.cycle.offer_log`, as the master runs) and without, in
turn on the same books (each round's offers given back, so every round does the same
work), the best of several each; then one `why` answer on those books.

    python -m benchmarks.allocator   (prints it beside the other rounds)
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

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

    def wish(self, framework_id: str, now: float) -> Wish | None:
        return Wish(framework_id, framework_id) if framework_id in self.frameworks else None

    def running(self) -> Iterator[RunningTask]:
        return iter(())

    def task_live(self, framework_id: str, task_id: str) -> bool:
        return False


def _cycle(n_slaves: int, n_frameworks: int) -> OfferCycle:
    allocator = Allocator("drf")
    names = [f"framework-{i}" for i in range(n_frameworks)]
    for name in names:
        allocator.add_framework(name, role=name)
    for i in range(n_slaves):
        allocator.add_slave(f"slave-{i}", SLAVE)
    return OfferCycle(allocator, _NoBooks(names), CycleConfig())


def _round(cycle: OfferCycle, now: float, record: bool) -> float:
    """One round, timed; then every offer given back unfiltered, so that the next round
    visits the same slaves and makes the same offers (the same work, round after round)."""
    cycle.config = replace(cycle.config, record_offers=record)
    gc.collect()
    start = time.perf_counter()
    offers = cycle.round(now).offers
    spent = time.perf_counter() - start
    for a in offers:
        cycle.decline(a.framework_id, a.slave_id, a.resources, None, now)
    return spent


def measure(n_slaves: int, n_frameworks: int, repeats: int) -> tuple[float, float, float]:
    """(a round without recording, with it, one `why` answer), seconds: the best of
    `repeats` rounds each, taken in turn on the same books (a shared machine's load falls
    on both alike, and the minimum is the cost)."""
    cycle = _cycle(n_slaves, n_frameworks)
    _round(cycle, 0.0, record=False)  # (the first round from empty warms the books up)
    without = with_ = math.inf
    for i in range(1, repeats + 1):
        for record in (i % 2 == 0, i % 2 == 1):  # (each first every other time)
            spent = _round(cycle, float(2 * i + record), record=record)
            if record:
                with_ = min(with_, spent)
            else:
                without = min(without, spent)
    cycle.round(2.0 * repeats)  # (offers held: the answer below has them to explain)
    start = time.perf_counter()
    cycle.why("framework-0", 2.0 * repeats)
    return without, with_, time.perf_counter() - start


@dataclass(frozen=True)
class WhyCost:
    """What `measure` found, for `benchmarks.allocator`'s table, bounds and JSON."""

    slaves: int
    frameworks: int
    without_ms: float
    with_ms: float
    one_why_ms: float

    @property
    def ratio(self) -> float:
        """A round with the recording, over one without (at most 1 + BOUND)."""
        return self.with_ms / self.without_ms

    @property
    def figure(self) -> str:
        return f"recording why, {self.slaves:,} x {self.frameworks:,}, a round"

    def table(self) -> str:
        return table(
            ["slaves x frameworks", "without ms", "with ms", "one why ms"],
            [[f"{self.slaves:,} x {self.frameworks:,}", self.without_ms, self.with_ms,
              self.one_why_ms]],
        )  # fmt: skip


def report(quick: bool) -> WhyCost:
    n, m = (1000, 100) if quick else (10_000, 1000)
    without, with_, asked = measure(n, m, repeats=5 if quick else 9)
    return WhyCost(n, m, without * 1e3, with_ * 1e3, asked * 1e3)


def main(quick: bool) -> None:
    cost = report(quick)
    print("an offer cycle's rounds with the recent offers recorded (for why) and without")
    print(cost.table())
    holds = cost.ratio <= 1 + BOUND
    print(bounds([(cost.figure, f"{cost.ratio:.2f}x", f"<= {1 + BOUND:g}x", holds)]))


__all__ = ["BOUND", "WhyCost", "main", "measure", "report"]
