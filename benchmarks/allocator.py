"""The allocation module alone, in the shape of Mesos's allocator benchmark.

    python -m benchmarks.allocator [--quick] [--json]

N slaves (24 cpus, 4096 mem each) by M frameworks, every offer declined: the time of one
full allocation round from an empty cluster, and of the round after every offer was declined
(with Mesos's default 5 s filter, so each slave skips the framework that refused it).
Each figure is the best of three fresh runs, each size's in an interpreter of its own (as
if built and timed alone: not among the smaller sizes' leftovers). A round runs with
Python's garbage collector paused and ends with one young collection of what it made,
counted in its time: that is `Allocator.allocate` itself
(`master.allocation.collector.PausedCollector`), the very call the master's rounds make.
Then the cost of one decision (picking the framework for one slave and recording it) as the
number of frameworks grows: it must grow like log n, not like n.

Then the hierarchical policies: one round of 10,000 slaves with 1,000 roles three levels
deep, beside a drf round of the same 1,000 roles side by side, interleaved (drf, hdrf,
naive-hdrf, flat, again and again: each tree round is read against the drf round just
before it, which a shared machine slows alike); the median of those ratios. And the exact
hdrf fair share of 1,000 frameworks (`fair_allocation`, as preemption and the UI ask).

Reference: Mesos 1.8 (C++) takes about 1.1 s for one round of 10,000 agents by 1,000
frameworks. Targets here: at most 0.25 s for that, and at most 0.5 s for 50,000 slaves by
1,000 frameworks (issue 34), each printed beside its bound and beside the 10,000 row of the
same run (a shared machine slows both alike: read the ratio too); an hdrf round within 2x
of the drf round, and the exact fair share within 50 ms (issue 51). Last, what recording
why a framework is offered nothing costs a round (`benchmarks.why_cost`, issue 47: a
round with the recording within 1.1x of one without). And what ports on every slave cost
a round (`benchmarks.ranges_cost`, issue 49: within 1.3x of scalars only, measured in the
same run), and what reservations with a persistent volume on every slave cost one, regular,
shared or mixed, as Mesos's PersistentVolumes benchmark (`benchmarks.volumes_cost`: the
worst within 2x of the same cluster unreserved).

The last line of output is one JSON object (`--json`: that line alone on stdout): every
figure with a bound, beside it, and whether it holds (`targets`), whether all do
(`holds`), the tables' figures, and the load average at the start and the end. It exits
1 when a bound does not hold. (`--quick` runs small sizes: the 2,000-slave tree round is
held to the same 2x; the round bounds of the large sizes are not measured.)
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import cast

from benchmarks import ranges_cost, volumes_cost, why_cost
from benchmarks.common import bounds, table
from master.allocation.allocator import Allocator
from master.allocation.fair_shares import Contender, _ideal_of, fair_allocation
from protocol.wire.resources import Resources

SLAVE = Resources(cpus=24, mem=4096)


def build(n_slaves: int, n_frameworks: int) -> Allocator:
    allocator = Allocator("drf")
    for i in range(n_frameworks):
        allocator.add_framework(f"framework-{i}", role=f"role-{i}")
    for i in range(n_slaves):
        allocator.add_slave(f"slave-{i}", SLAVE)
    return allocator


def timed_round(allocator: Allocator, now: float) -> tuple[float, int]:
    gc.collect()
    start = time.perf_counter()
    offers = allocator.allocate(now, full=True)
    elapsed = time.perf_counter() - start
    for a in offers:  # every offer declined, with the default filter
        allocator.recover(a.framework_id, a.slave_id, a.resources, refuse_seconds=5, now=now)
    return elapsed, len(offers)


def rounds(sizes: list[tuple[int, int]], repeats: int) -> list[list[object]]:
    """Each size's row (`size_rounds`), each in a fresh interpreter of its own: built in
    the process that had built and freed the smaller sizes' allocators, the 50,000 x
    1,000 round ran 15-40% slower than built and timed alone (its books laid out among
    their leftovers; a collection before each build did not undo it)."""
    return [_alone(n, m, repeats) for n, m in sizes]


def _alone(n: int, m: int, repeats: int) -> list[object]:
    code = (
        "import json; from benchmarks.allocator import size_rounds; "
        f"print(json.dumps(size_rounds({n}, {m}, {repeats})))"
    )
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=root, check=True, capture_output=True, text=True
    )
    return cast(list[object], json.loads(run.stdout))


def size_rounds(n: int, m: int, repeats: int) -> list[object]:
    """Best of `repeats` fresh runs: the machine is shared, the minimum is the cost."""
    firsts, seconds = [], []
    for _ in range(repeats):
        allocator = build(n, m)
        first, offers = timed_round(allocator, 0.0)
        second, offers2 = timed_round(allocator, 1.0)
        firsts.append(first)
        seconds.append(second)
    return [n, m, offers, min(firsts) * 1e3, offers2, min(seconds) * 1e3]


@dataclass(frozen=True)
class Target:
    """A figure beside its bound (at most), as the table shows it and the JSON gives it."""

    figure: str
    value: float
    unit: str  # "ms", or "x" for a ratio
    bound: float
    note: str = ""  # how it was read (of how many runs), or what it is beside

    @property
    def holds(self) -> bool:
        return self.value <= self.bound

    def row(self) -> tuple[str, str, str, bool]:
        value = f"{self.value:.2f}x" if self.unit == "x" else f"{self.value:.0f} {self.unit}"
        bound = f"{self.bound:g}x" if self.unit == "x" else f"{self.bound:g} {self.unit}"
        return (self.figure, f"{value} ({self.note})" if self.note else value, f"<= {bound}",
                self.holds)  # fmt: skip


def round_targets(measured: list[list[object]]) -> list[Target]:
    """Each size's rounds beside its bound, and the 50,000 row beside the 10,000 one."""
    by_size = {(row[0], row[1]): (cast(float, row[3]), cast(float, row[5])) for row in measured}
    ten, fifty = by_size[(10000, 1000)], by_size[(50000, 1000)]
    rows = []
    for which, i in (("1st", 0), ("2nd", 1)):
        rows.append(Target(f"10,000 x 1,000, {which} round", ten[i], "ms", 250, "best of 3"))
        ratio = f"best of 3, x{fifty[i] / ten[i]:.1f} the 10,000 row"
        rows.append(Target(f"50,000 x 1,000, {which} round", fifty[i], "ms", 500, ratio))
    return rows


def decision_cost(framework_counts: list[int], decisions: int = 20_000) -> list[list[object]]:
    """Mean time to place one slave with n frameworks (slaves small, so shares move)."""
    rows: list[list[object]] = []
    for n in framework_counts:
        allocator = Allocator("drf")
        for i in range(n):
            allocator.add_framework(f"f{i}", role=f"r{i}")
        for i in range(decisions):
            allocator.add_slave(f"s{i}", Resources(cpus=1, mem=128))
        gc.collect()
        start = time.perf_counter()
        allocator.allocate(0.0, full=True)
        per = (time.perf_counter() - start) / decisions
        rows.append([n, per * 1e6, per * 1e6 / math.log2(n) if n > 1 else float("nan")])
    return rows


TREE_POLICIES = ("hdrf", "naive-hdrf", "flat")
HDRF_BOUND = 2.0  # an hdrf round, at most this many drf rounds (issue 51)
FAIR_SHARE_BOUND_MS = 50.0  # the exact hdrf fair share of 1,000 frameworks (issue 51)


def tree_round(policy: str, n_slaves: int, fanout: int = 10) -> float:
    """One full round from fresh, every offer declined, with 1,000 roles three levels deep
    (fanout^3 leaf roles, a framework in each, weights varying) -- or, for a flat policy,
    the same 1,000 roles side by side."""
    allocator = Allocator(policy)
    if policy in TREE_POLICIES:
        for a in range(fanout):
            allocator.roles.set_weight(f"d{a}", 1 + a % 3)
            for b in range(fanout):
                allocator.roles.set_weight(f"d{a}/t{b}", 1 + b % 2)
    for a in range(fanout):
        for b in range(fanout):
            for c in range(fanout):
                allocator.add_framework(f"f{a}.{b}.{c}", role=f"d{a}/t{b}/r{c}")
    for i in range(n_slaves):
        allocator.add_slave(f"slave-{i}", SLAVE)
    elapsed, _ = timed_round(allocator, 0.0)
    return elapsed


def tree_rounds(n_slaves: int, repeats: int) -> dict[str, list[float]]:
    """Each policy's round `repeats` times, interleaved: drf, then each tree policy, and
    again (so each tree round has a drf round beside it in the same moments)."""
    times: dict[str, list[float]] = {p: [] for p in ("drf", *TREE_POLICIES)}
    for _ in range(repeats):
        for policy, runs in times.items():
            runs.append(tree_round(policy, n_slaves))
    return times


def over_drf(times: dict[str, list[float]], policy: str) -> float:
    """The median of `policy`'s rounds each over the drf round run just before it."""
    return statistics.median(t / d for t, d in zip(times[policy], times["drf"], strict=True))


def tree_fair_share(fanout: int = 10, repeats: int = 3) -> tuple[list[float], int]:
    """The fair share (`master.allocation.fair_shares.fair_allocation`, as preemption and the UI ask
    for it) of 1,000 frameworks three levels deep, exact: every framework wanting more of
    one of four task sizes, pools weighted 1-3. Each of `repeats` times, nothing remembered."""
    shapes = [{"cpus": 1000, "mem": 512_000}, {"cpus": 2000, "mem": 1_024_000},
              {"cpus": 500, "mem": 2_048_000}, {"cpus": 4000, "mem": 256_000}]  # fmt: skip
    contenders = [
        Contender(
            f"f{a}.{b}.{c}",
            f"d{a}/t{b}/r{c}",
            1.0,
            {},
            wants=True,
            shape=shapes[(a + b + c) % len(shapes)],
        )
        for a in range(fanout)
        for b in range(fanout)
        for c in range(fanout)
    ]
    weights = {f"d{a}": float(1 + a % 3) for a in range(fanout)}
    weights.update({f"d{a}/t{b}": float(1 + b % 2) for a in range(fanout) for b in range(fanout)})
    total = {"cpus": 10_000_000, "mem": 20_000_000_000}
    times = []
    for _ in range(repeats):
        _ideal_of.cache_clear()
        gc.collect()
        start = time.perf_counter()
        shares = fair_allocation("hdrf", total, contenders, weights)
        times.append(time.perf_counter() - start)
    return times, len(shares)


def main(quick: bool, as_json: bool) -> int:
    say = (lambda *_: None) if as_json else print
    load_at_start = os.getloadavg()[0]
    sizes = [(1000, 100), (1000, 1000)]
    if not quick:
        sizes += [(5000, 100), (5000, 1000), (10000, 100), (10000, 1000), (50000, 1000)]
    say("one allocation round: N slaves x M frameworks, every offer declined (5 s filter)")
    headers = ["slaves", "frameworks", "offers", "1st round ms", "offers", "2nd round ms"]
    measured = rounds(sizes, repeats=1 if quick else 3)
    say(table(headers, measured))
    targets = [] if quick else round_targets(measured)
    say()
    say("one decision as frameworks grow (should grow like log n)")
    counts = [10, 100, 1000] if quick else [10, 100, 1000, 10000]
    decisions = decision_cost(counts)
    say(table(["frameworks", "us/decision", "us/log2(n)"], decisions))
    say()
    n = 2000 if quick else 10_000
    times = tree_rounds(n, repeats=1 if quick else 5)
    rows = [["drf (1,000 roles side by side)", statistics.median(times["drf"]) * 1e3, 1.0]]
    for policy in TREE_POLICIES:
        ms = statistics.median(times[policy]) * 1e3
        rows.append([f"{policy} (1,000 roles, 3 levels)", ms, over_drf(times, policy)])
    say(f"one round, {n:,} slaves, 1,000 roles of one framework each (medians; x drf: of each")
    say("round over the drf round just before it)")
    say(table(["policy", "round ms", "x drf"], rows))
    say()
    fair, count = tree_fair_share(repeats=1 if quick else 5)
    hdrf = over_drf(times, "hdrf")
    targets += [
        Target(
            f"hdrf round, {n:,} slaves, 1,000 roles in 3 levels",
            hdrf,
            "x",
            HDRF_BOUND,
            f"of drf's, median of {len(times['drf'])}",
        ),
        Target(
            f"exact hdrf fair share, {count:,} frameworks",
            min(fair) * 1e3,
            "ms",
            FAIR_SHARE_BOUND_MS,
            f"best of {len(fair)}",
        ),
    ]
    say()
    say("an offer cycle's round with the recent offers recorded (for why) and without")
    why = why_cost.report(quick)
    say(why.table())
    targets.append(
        Target(why.figure, why.ratio, "x", 1 + why_cost.BOUND, "with over without, best of each")
    )
    say()
    say("a round with ports:[31000-32000] on every slave (counted by DRF, each offer's ports")
    say("picked), beside a round of scalars only, interleaved")
    ranges = ranges_cost.report(quick)
    say(ranges.table())
    targets.append(
        Target(
            ranges.figure,
            ranges.ratio,
            "x",
            ranges_cost.BOUND,
            f"over scalars only, median of {len(ranges.ranges_ms)}",
        )
    )
    say()
    say("a round with reservations and a persistent volume on every slave (regular, shared,")
    say("mixed: Mesos's PersistentVolumes benchmark), beside the cluster unreserved, interleaved")
    volumes = volumes_cost.report(quick)
    say(volumes.table())
    targets.append(
        Target(
            volumes.figure,
            volumes.ratio,
            "x",
            volumes_cost.BOUND,
            f"over unreserved, median of {len(volumes.plain_ms) // len(volumes_cost.KINDS)}",
        )
    )
    say(bounds([t.row() for t in targets]))
    keys = ("slaves", "frameworks", "offers", "first_ms", "offers_after", "second_ms")
    result = {
        "targets": [{**asdict(t), "holds": t.holds} for t in targets],
        "holds": all(t.holds for t in targets),
        "tree_round_ms": {p: [t * 1e3 for t in ts] for p, ts in times.items()},
        "tree_round_slaves": n,
        "fair_share_ms": [t * 1e3 for t in fair],
        "rounds": [dict(zip(keys, row, strict=True)) for row in measured],
        "decisions": [
            dict(zip(("frameworks", "us", "us_per_log2_n"), r, strict=True)) for r in decisions
        ],
        "why": asdict(why),
        "ranges": asdict(ranges),
        "volumes": asdict(volumes),
        "load_at_start": load_at_start,
        "load_at_end": os.getloadavg()[0],
    }
    print(json.dumps(result))
    return 0 if result["holds"] else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    args = parser.parse_args()
    sys.exit(main(args.quick, args.json))
