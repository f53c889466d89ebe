"""Simulator speed: simulated task events (starts and finishes) per second.

    python -m benchmarks.simulator

Runs the §7.3-style trace (400 nodes, ten users, examples/experiments/paper-7.3.yaml)
under DRF and under slot-based sharing, and the §7.2 workload (48 nodes, 8 users); DRF
both as the paper's frameworks behave (declining what they cannot use) and with offer
filters (`min_offer`: offered only slaves with room for a task), which ends the declines.
Then issue 25's tree under hdrf with preemption on (`tree_run`), and one hour of
Facebook's 2010 workload (examples/experiments/fb2010-hour.yaml, SWIM's
FB-2010 sample in examples/experiments/traces/swim) under DRF and under 12 slots a node; `--day`
adds the whole day (fb2010-day.yaml) under both, about 6 minutes.

A run that takes under QUICK seconds is repeated (three times in all, `--repeat`) and
the fastest is kept, as timeit does: on a shared machine noise only ever slows a run,
and a single sub-second run varies by a fifth from one minute to the next.

The targets, printed beside what this run measured: DRF on §7.3 at least 100,000 task
events/s and within 2x of slots in the same run; DRF on §7.3 as the paper's frameworks
behave (no `min_offer`: most of its work is offers made and declined) at least 50,000
(issue 51), printed beside slots' speed in the same run (a shared machine slows both
alike); the FB-2010 hour in under a minute, the day in under ten (each under the slower
of the two policies).

The last line of output is one JSON object (`--json`: that line alone on stdout): every
target with its figure and bound (as said, and as numbers: `value`, `limit`) and whether it
holds, whether all do (`holds`), each run's
row, and the load average at the start and the end. It exits 1 when a bound does not hold.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from benchmarks.common import bounds, table
from cluster.experiments.simulator import simulate
from cluster.experiments.spec import Duration, Master, load_spec

EXAMPLES = Path(__file__).parent.parent / "examples" / "experiments"
QUICK = 10.0  # seconds: a run shorter than this is repeated, and the fastest kept


def run(
    name: str, policy: str, slots: int | None, min_offer: bool | None, repeat: int
) -> list[object]:
    spec = load_spec(EXAMPLES / f"{name}.yaml")
    if min_offer is not None:
        for fw in spec.frameworks:
            fw.min_offer = min_offer
    master = {**spec.master.model_dump(), "policy": policy}
    if slots:
        master["slots_per_node"] = slots
    spec.master = Master.model_validate(master)
    _, speed = simulate(spec)
    for _ in range(repeat - 1):
        if speed["wall_seconds"] >= QUICK:
            break
        _, again = simulate(spec)  # (the same spec: the same events, only the time differs)
        if again["wall_seconds"] < speed["wall_seconds"]:
            speed = again
    return [
        name,
        policy + (" + min_offer" if min_offer or (min_offer is None and policy != "slots") else ""),
        len(spec.cluster.nodes()),
        f"{spec.run.duration:g}",
        speed["task_events"],
        speed["wall_seconds"],
        speed["events_per_second"],
        speed["offers"],
        speed["declines"],
    ]


def tree_run(repeat: int) -> list[object]:
    """Issue 25's tree (examples/experiments/hdrf-saturated-leaf.yaml: x beside pool p,
    whose leaf CMD wants two small tasks) for 300 s under hdrf with preemption on, its
    tasks shortened to 0.05-0.15 s so that it has tens of thousands of task events: the
    fair share is asked for at every preemption check."""
    spec = load_spec(EXAMPLES / "hdrf-saturated-leaf.yaml")
    for fw in spec.frameworks:
        fw.duration = Duration.model_validate({"uniform": [0.05, 0.15]})
    best: dict[str, float] | None = None
    for _ in range(repeat):
        _, speed = simulate(spec)
        if best is None or speed["wall_seconds"] < best["wall_seconds"]:
            best = speed
    assert best is not None
    return ["hdrf-saturated-leaf (short tasks)", "hdrf + preemption", len(spec.cluster.nodes()),
            f"{spec.run.duration:g}", best["task_events"], best["wall_seconds"],
            best["events_per_second"], best["offers"], best["declines"]]  # fmt: skip


HEADERS = ["spec", "policy", "nodes", "simulated s", "task events", "wall s", "events/s"]


def main(day: bool, repeat: int, as_json: bool) -> int:
    say = (lambda *_: None) if as_json else print
    load_at_start = os.getloadavg()[0]
    runs = [
        ("paper-7.3", "drf", None, False),
        ("paper-7.3", "drf", None, True),
        ("paper-7.3", "slots", 12, False),
        ("paper-7.2", "drf", None, False),
        ("paper-7.2", "drf", None, True),
        ("paper-7.2", "slots", 4, False),
        ("fb2010-hour", "drf", None, None),
        ("fb2010-hour", "slots", 12, None),
    ]
    if day:
        runs += [("fb2010-day", "drf", None, None), ("fb2010-day", "slots", 12, None)]
    rows = [run(*r, repeat) for r in runs]
    tree = tree_run(repeat)
    rows.append(tree)
    say(
        "simulator speed (task events = task starts + finishes; "
        f"a run under {QUICK:g} s: the fastest of {repeat})"
    )
    say(table([*HEADERS, "offers", "declines"], rows))

    def find(spec: str, policy: str) -> list[object]:
        return next(r for r in rows if r[0] == spec and r[1] == policy)

    drf, slots = find("paper-7.3", "drf + min_offer"), find("paper-7.3", "slots")
    drf_speed, slots_speed = float(str(drf[6])), float(str(slots[6]))
    declining = float(str(find("paper-7.3", "drf")[6]))

    def slowest(spec: str) -> float:
        return max(float(str(find(spec, p)[5])) for p in ("drf + min_offer", "slots"))

    hour = slowest("fb2010-hour")
    tree_speed = float(str(tree[6]))
    # (what is said, its figure and bound as text, whether it holds; the figure and the
    # bound as numbers, for the JSON)
    targets: list[tuple[str, str, str, bool, float, float]] = [
        ("§7.3, DRF events/s", f"{drf_speed:,.0f}", ">= 100,000", drf_speed >= 100_000,
         drf_speed, 100_000),
        ("§7.3, DRF beside slots (same run)", f"slots / DRF = x{slots_speed / drf_speed:.2f}",
         f"within x2 of {slots_speed:,.0f}/s", drf_speed * 2 >= slots_speed,
         slots_speed / drf_speed, 2.0),
        ("§7.3, DRF without min_offer (offers declined), events/s",
         f"{declining:,.0f} (slots: {slots_speed:,.0f}, same run)", ">= 50,000",
         declining >= 50_000, declining, 50_000),
        ("FB-2010, one hour (slowest policy)", f"{hour:.1f} s", "< 60 s", hour < 60, hour, 60),
        ("issue 25's tree, hdrf + preemption, events/s", f"{tree_speed:,.0f}", ">= 10,000",
         tree_speed >= 10_000, tree_speed, 10_000),
    ]  # fmt: skip
    if day:
        whole = slowest("fb2010-day")
        targets.append(
            (
                "FB-2010, the whole day (slowest policy)",
                f"{whole:.0f} s",
                "< 600 s",
                whole < 600,
                whole,
                600,
            )
        )
    say(bounds([t[:4] for t in targets]))
    keys = ["spec", "policy", "nodes", "simulated_s", "task_events", "wall_s", "events_per_s",
            "offers", "declines"]  # fmt: skip
    result = {
        "targets": [
            {
                "figure": what,
                "measured": got,
                "bound": bound,
                "holds": ok,
                "value": value,
                "limit": limit,
            }
            for what, got, bound, ok, value, limit in targets
        ],
        "holds": all(t[3] for t in targets),
        "runs": [dict(zip(keys, row, strict=True)) for row in rows],
        "load_at_start": load_at_start,
        "load_at_end": os.getloadavg()[0],
    }
    print(json.dumps(result))
    return 0 if result["holds"] else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--day", action="store_true", help="also replay the whole FB-2010 day")
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help=f"runs of each spec under {QUICK:g} s (the fastest kept)",
    )
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    args = parser.parse_args()
    sys.exit(main(args.day, max(1, args.repeat), args.json))
