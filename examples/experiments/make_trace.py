"""Write the synthetic job traces for paper-7.3.yaml (a §7.3-style workload).

    python examples/experiments/make_trace.py     # rewrites traces/user-*.csv

The Facebook trace the paper replays is not public; this stands in for it with the same
shape: ten users submit jobs over half an hour, most jobs small (1-20 tasks) and one in five
large (200-1200 tasks); most tasks are CPU-heavy map tasks, some memory-heavy reduces.
Seeded: the same files every time.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

USERS = 10
HORIZON = 1800.0  # seconds of submissions
JOBS_PER_USER = 80


def main() -> None:
    out = Path(__file__).parent / "traces"
    out.mkdir(exist_ok=True)
    rng = random.Random(7)
    for u in range(USERS):
        t = 0.0
        rows = []
        for _ in range(JOBS_PER_USER):
            t += rng.expovariate(JOBS_PER_USER / HORIZON)
            large = rng.random() < 0.2
            tasks = rng.randint(200, 1200) if large else rng.randint(1, 20)
            if rng.random() < 0.7:  # a map-like, CPU-heavy task
                cpus, mem = rng.choice([1, 2, 4]), rng.choice([1024, 2048])
            else:  # a reduce-like, memory-heavy task
                cpus, mem = 1, rng.choice([4096, 6144, 8192])
            duration = round(min(600.0, rng.lognormvariate(3.6, 0.7)), 1)
            rows.append([round(t, 1), tasks, cpus, mem, duration])
        with (out / f"user-{u}.csv").open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["submit", "tasks", "cpus", "mem", "duration"])
            w.writerows(rows)


if __name__ == "__main__":
    main()
