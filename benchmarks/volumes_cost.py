"""What reservations and persistent volumes on every slave cost an allocation round, in
the shape of Mesos's `HierarchicalAllocations_BENCHMARK_Test.PersistentVolumes`: N slaves
with `cpus(test):24;mem(test):4096;disk(test):3072` and a 1024 MB persistent volume on
that disk (REGULAR, SHARED, or MIXED: shared on every other slave), M frameworks of role
`test` (taking shared resources where any are), each slave holding a task's worth of one
framework's (`cpus(test):16;mem(test):1024;disk(test):1024`). Beside it, in the same run,
the same cluster unreserved and without volumes (the bound: at most BOUND of its round).

A round is `Allocator.allocate`; its offers are then given back unfiltered, so every round
does the same work. The kinds of round are interleaved (unreserved, then each kind of
volume, again and again: a shared machine slows them alike); each figure is the median of
a kind's rounds over the unreserved round just before it.

    python -m benchmarks.allocator   (prints it beside the other rounds)
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass, field

from benchmarks.common import table
from master.allocation.allocator import Allocator
from protocol.wire.resources import Resources

BOUND = 2.0  # a round with reservations and a volume on every slave, at most this many plain
KINDS = ("REGULAR", "SHARED", "MIXED")  # (Mesos's sharedness parameter)
ROLE = "test"


def _volume(i: int, shared: bool) -> str:
    return f"disk({ROLE})[id{i}:path{i}]{'<SHARED>' if shared else ''}:1024"


class Cluster:
    """An allocator of N slaves by M frameworks: unreserved (`kind` None) or as Mesos's
    benchmark (`kind` one of KINDS)."""

    def __init__(self, n_slaves: int, n_frameworks: int, kind: str | None) -> None:
        self.allocator = Allocator("drf")
        frameworks = [f"framework-{i}" for i in range(n_frameworks)]
        for fid in frameworks:
            self.allocator.add_framework(fid, role=ROLE)
            if kind in ("SHARED", "MIXED"):
                self.allocator.take_shared(fid)
        for i in range(n_slaves):
            if kind is None:
                total = Resources.parse("cpus:24;mem:4096;disk:3072")
                used = Resources.parse("cpus:16;mem:1024;disk:1024")
            else:
                shared = kind == "SHARED" or (kind == "MIXED" and i % 2 == 0)
                reserved = f"cpus({ROLE}):24;mem({ROLE}):4096;disk({ROLE}):2048"
                total = Resources.parse(f"{reserved};{_volume(i, shared)}")
                used = Resources.parse(f"cpus({ROLE}):16;mem({ROLE}):1024;disk({ROLE}):1024")
            sid = f"slave-{i}"
            self.allocator.add_slave(sid, total, used={frameworks[i % n_frameworks]: used})

    def round(self, now: float) -> tuple[float, int]:
        """One round, timed; then every offer given back."""
        gc.collect()
        start = time.perf_counter()
        allocations = self.allocator.allocate(now, full=True)
        spent = time.perf_counter() - start
        for a in allocations:
            self.allocator.recover(a.framework_id, a.slave_id, a.resources)
        return spent, len(allocations)


@dataclass(frozen=True)
class VolumesCost:
    """Rounds of each kind beside the unreserved ones, and the worst figure."""

    slaves: int
    frameworks: int
    plain_ms: list[float]
    kinds_ms: dict[str, list[float]] = field(default_factory=dict)
    ratios: dict[str, float] = field(default_factory=dict)  # median over the plain round

    @property
    def ratio(self) -> float:
        return max(self.ratios.values())

    @property
    def figure(self) -> str:
        return (
            f"round with reservations and a volume on every slave (worst of "
            f"{', '.join(KINDS).lower()}), {self.slaves:,} x {self.frameworks:,}"
        )

    def table(self) -> str:
        rows = [["unreserved, no volume", statistics.median(self.plain_ms), 1.0]]
        for kind in KINDS:
            rows.append([f"{kind.lower()} volume", statistics.median(self.kinds_ms[kind]),
                         self.ratios[kind]])  # fmt: skip
        return table(["slaves' resources", "round ms (median)", "x unreserved"], rows)


def report(quick: bool) -> VolumesCost:
    n, m, repeats = (2000, 200, 3) if quick else (10_000, 1000, 5)
    plain = Cluster(n, m, None)
    clusters = {kind: Cluster(n, m, kind) for kind in KINDS}
    plain.round(0.0)  # (the first round from empty warms the books up)
    for c in clusters.values():
        c.round(0.0)
    plain_times: list[float] = []
    times: dict[str, list[float]] = {kind: [] for kind in KINDS}
    over: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for i in range(1, repeats + 1):
        for kind, c in clusters.items():
            base = plain.round(float(i))[0]
            spent = c.round(float(i))[0]
            plain_times.append(base)
            times[kind].append(spent)
            over[kind].append(spent / base)
    return VolumesCost(
        n,
        m,
        [t * 1e3 for t in plain_times],
        {k: [t * 1e3 for t in ts] for k, ts in times.items()},
        {k: statistics.median(rs) for k, rs in over.items()},
    )


if __name__ == "__main__":
    cost = report(quick=False)
    print(cost.table())
    print(f"{cost.figure}: {cost.ratio:.2f}x (bound {BOUND:g}x)")
