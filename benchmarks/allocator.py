"""The allocation module alone, in the shape of Mesos's allocator benchmark.

    python -m benchmarks.allocator [--quick]

N slaves (24 cpus, 4096 mem each) by M frameworks, every offer declined: the time of one
full allocation round from an empty cluster, and of the round after every offer was declined
(with Mesos's default 5 s filter, so each slave skips the framework that refused it).
Each figure is the best of three fresh runs. A round runs with Python's garbage collector
paused and ends with one young collection of what it made, counted in its time: that is
`Allocator.allocate` itself (`master.allocation.collector.paused_collector`), the very call
the master's rounds make.
Then the cost of one decision (picking the framework for one slave and recording it) as the
number of frameworks grows: it must grow like log n, not like n.

Reference: Mesos 1.8 (C++) takes about 1.1 s for one round of 10,000 agents by 1,000
frameworks. Targets here: at most 0.25 s for that, and at most 0.5 s for 50,000 slaves by
1,000 frameworks (issue 34), each printed beside its bound and beside the 10,000 row of the
same run (a shared machine slows both alike: read the ratio too). Last, what recording
why a framework is offered nothing costs a round (`benchmarks.why_cost`).
"""

from __future__ import annotations

import argparse
import gc
import math
import time
from typing import cast

from benchmarks import why_cost
from benchmarks.common import bounds, table
from master.allocation.allocator import Allocator
from master.allocation.preemption import Contender, _ideal_of, fair_allocation
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
    """Best of `repeats` fresh runs: the machine is shared, the minimum is the cost."""
    rows: list[list[object]] = []
    for n, m in sizes:
        firsts, seconds = [], []
        for _ in range(repeats):
            allocator = build(n, m)
            first, offers = timed_round(allocator, 0.0)
            second, offers2 = timed_round(allocator, 1.0)
            firsts.append(first)
            seconds.append(second)
        rows.append([n, m, offers, min(firsts) * 1e3, offers2, min(seconds) * 1e3])
    return rows


def round_targets(measured: list[list[object]]) -> list[tuple[str, str, str, bool]]:
    """Each size's rounds beside its bound, and the 50,000 row beside the 10,000 one."""
    by_size = {(row[0], row[1]): (cast(float, row[3]), cast(float, row[5])) for row in measured}
    ten, fifty = by_size[(10000, 1000)], by_size[(50000, 1000)]
    rows = []
    for which, i in (("1st", 0), ("2nd", 1)):
        ratio = fifty[i] / ten[i]
        rows.append(
            (f"10,000 x 1,000, {which} round", f"{ten[i]:.0f} ms", "<= 250 ms", ten[i] <= 250)
        )
        rows.append(
            (
                f"50,000 x 1,000, {which} round",
                f"{fifty[i]:.0f} ms (x{ratio:.1f} the 10,000 row)",
                "<= 500 ms",
                fifty[i] <= 500,
            )
        )
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


def tree_round(policy: str, n_slaves: int, fanout: int = 10, repeats: int = 3) -> float:
    """One full round, every offer declined, with 1,000 roles three levels deep
    (fanout^3 leaf roles, a framework in each, weights varying) -- or, for a flat policy,
    the same 1,000 roles side by side."""
    best = math.inf
    for _ in range(repeats):
        allocator = Allocator(policy)
        if policy in ("hdrf", "naive-hdrf", "flat"):
            for a in range(fanout):
                allocator.set_role_weight(f"d{a}", 1 + a % 3)
                for b in range(fanout):
                    allocator.set_role_weight(f"d{a}/t{b}", 1 + b % 2)
        for a in range(fanout):
            for b in range(fanout):
                for c in range(fanout):
                    allocator.add_framework(f"f{a}.{b}.{c}", role=f"d{a}/t{b}/r{c}")
        for i in range(n_slaves):
            allocator.add_slave(f"slave-{i}", SLAVE)
        elapsed, _ = timed_round(allocator, 0.0)
        best = min(best, elapsed)
    return best


def tree_fair_share(fanout: int = 10, repeats: int = 3) -> tuple[float, int]:
    """The fair share (`master.allocation.preemption.fair_allocation`, as preemption and the UI ask
    for it) of 1,000 frameworks three levels deep, exact: every framework wanting more of
    one of four task sizes, pools weighted 1-3. Best of `repeats`, nothing remembered."""
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
    best = math.inf
    for _ in range(repeats):
        _ideal_of.cache_clear()
        gc.collect()
        start = time.perf_counter()
        shares = fair_allocation("hdrf", total, contenders, weights)
        best = min(best, time.perf_counter() - start)
    return best, len(shares)


def main(quick: bool) -> None:
    sizes = [(1000, 100), (1000, 1000)]
    if not quick:
        sizes += [(5000, 100), (5000, 1000), (10000, 100), (10000, 1000), (50000, 1000)]
    print("one allocation round: N slaves x M frameworks, every offer declined (5 s filter)")
    headers = ["slaves", "frameworks", "offers", "1st round ms", "offers", "2nd round ms"]
    measured = rounds(sizes, repeats=1 if quick else 3)
    print(table(headers, measured))
    if not quick:
        print(bounds(round_targets(measured)))
    print()
    print("one decision as frameworks grow (should grow like log n)")
    counts = [10, 100, 1000] if quick else [10, 100, 1000, 10000]
    print(table(["frameworks", "us/decision", "us/log2(n)"], decision_cost(counts)))
    print()
    n = 2000 if quick else 10_000
    flat = tree_round("drf", n, repeats=1 if quick else 3)
    rows = [["drf (1,000 roles side by side)", flat * 1e3, 1.0]]
    for policy in ("hdrf", "naive-hdrf", "flat"):
        t = tree_round(policy, n, repeats=1 if quick else 3)
        rows.append([f"{policy} (1,000 roles, 3 levels)", t * 1e3, t / flat])
    print(f"one round, {n} slaves, 1,000 roles of one framework each (target: hdrf within 2x)")
    print(table(["policy", "round ms", "x drf"], rows))
    print()
    fair, count = tree_fair_share(repeats=1 if quick else 3)
    print(f"the hdrf fair share of {count} frameworks, 3 levels, exact: {fair * 1e3:.0f} ms "
          "(target: at most 50 ms)")  # fmt: skip
    print()
    why_cost.main(quick)  # what keeping why's reasons costs a round (issue 47)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    main(parser.parse_args().quick)
