"""The paper's comparisons, simulated: §7.2 (DRF vs 3-6 slots per node vs CPU-only) and
§7.3 (DRF vs slots on the 400-node trace and on FB-2010). Writes the tables (compare.md)
and their charts (PNG) into --out, `out/compare` by default:

    python examples/experiments/compare.py                 # into out/compare/
    python examples/experiments/compare.py --out examples/experiments/results   # publish

The published ones are in examples/experiments/results/; tests/test_experiments.py runs
this and compares its compare.md with the published one, so a stale figure fails CI.
"""

from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from cluster.experiments.simulator import simulate
from cluster.experiments.spec import Master, load_spec

HERE = Path(__file__).parent
VARIANTS_72 = [
    ("DRF", "drf", None),
    ("3 slots", "slots", 3),
    ("4 slots", "slots", 4),
    ("5 slots", "slots", 5),
    ("6 slots", "slots", 6),
    ("CPU-fair", "cpu", None),
]


def run(name: str, policy: str, slots: int | None) -> dict:
    spec = load_spec(HERE / f"{name}.yaml")
    spec.master = Master.model_validate(
        {
            **spec.master.model_dump(),
            "policy": policy,
            **({"slots_per_node": slots} if slots else {}),
        }
    )
    results, _ = simulate(spec)
    return results.summary()


def secs(x: float) -> str:
    """Seconds as the tables show them: '-' where no job finished."""
    return "-" if math.isnan(x) else f"{x:.0f}"


def start(section: str) -> str:
    """Where a table the docs include begins (a pymdownx.snippets section marker)."""
    return f"<!-- --8<-- [start:{section}] -->"


def end(section: str) -> str:
    return f"<!-- --8<-- [end:{section}] -->"


def kind_stats(summary: dict, prefix: str) -> tuple[int, float]:
    fws = [f for n, f in summary["frameworks"].items() if n.startswith(prefix)]
    jobs = sum(f["jobs_completed"] for f in fws)
    times = [f["mean_job_response_time"] for f in fws if f["jobs_completed"]]
    return jobs, statistics.fmean(times) if times else float("nan")


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    lines = [
        "## §7.2: 48 nodes of 8 CPU / 6 GB, 4 small-job and 4 large-job users, 10 min",
        "",
        start("paper-72"),
        "| scheme | small jobs done | large jobs done | small job time s | large job time s "
        "| cpu util | mem util |",
        "|---|---|---|---|---|---|---|",
    ]
    bars: dict[str, list[float]] = {"small": [], "large": [], "small_t": [], "large_t": []}
    for label, policy, slots in VARIANTS_72:
        s = run("paper-7.2", policy, slots)
        (sj, st), (lj, lt) = kind_stats(s, "small"), kind_stats(s, "large")
        u = s["utilisation"]
        lines.append(
            f"| {label} | {sj} | {lj} | {secs(st)} | {secs(lt)} "
            f"| {u['cpus']:.0%} | {u['mem']:.0%} |"
        )
        bars["small"].append(sj)
        bars["large"].append(lj)
        bars["small_t"].append(st)
        bars["large_t"].append(lt)
    lines.append(end("paper-72"))
    labels = [v[0] for v in VARIANTS_72]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    x = range(len(labels))
    for ax, (a, b, title) in zip(
        axes,
        [
            ("small", "large", "jobs completed in 10 min"),
            ("small_t", "large_t", "mean job response time (s)"),
        ],
        strict=True,
    ):
        ax.bar([i - 0.2 for i in x], bars[a], width=0.4, label="small jobs")
        ax.bar([i + 0.2 for i in x], bars[b], width=0.4, label="large jobs")
        ax.set_xticks(list(x), labels, rotation=20)
        ax.set_title(title)
        ax.legend()
    fig.suptitle("§7.2 simulated: DRF vs slot-based fair sharing vs CPU-only fair sharing")
    fig.tight_layout()
    fig.savefig(out / "paper-7.2-compare.png", dpi=90)
    plt.close(fig)

    lines += [
        "",
        "## §7.3-style trace: 400 nodes of 16 cores / 32 GB, 10 users",
        "",
        start("paper-73"),
        "| scheme | jobs done | mean job time s | cpu util | mem util |",
        "|---|---|---|---|---|",
    ]
    for label, policy, slots in (("DRF", "drf", None), ("12 slots", "slots", 12)):
        s = run("paper-7.3", policy, slots)
        fws = s["frameworks"].values()
        jobs = sum(f["jobs_completed"] for f in fws)
        times = [f["mean_job_response_time"] for f in fws if f["jobs_completed"]]
        u = s["utilisation"]
        lines.append(
            f"| {label} | {jobs} | {statistics.fmean(times):.0f} | {u['cpus']:.0%} "
            f"| {u['mem']:.0%} |"
        )
    lines.append(end("paper-73"))
    lines += fb2010(out)
    (out / "compare.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


BUCKETS = [(1, 10), (11, 50), (51, 100), (101, 200), (201, 500), (501, 1000), (1001, None)]


def fb2010(out: Path) -> list[str]:
    """§7.3 on the real workload: one hour of SWIM's FB-2010 (fb2010-hour.yaml), DRF vs 12
    slots. Figure 14: job completion time reduction by job size; Figure 13: utilisation."""
    spec_path = HERE / "fb2010-hour.yaml"
    runs = {}
    for label, policy in (("DRF", "drf"), ("12 slots", "slots")):
        spec = load_spec(spec_path)
        spec.master.policy = policy  # type: ignore[assignment]
        results, speed = simulate(spec)
        by_bucket: dict[tuple[int, int | None], list[float]] = {b: [] for b in BUCKETS}
        for stats in results.framework_stats.values():
            for size, seconds in zip(stats["job_sizes"], stats["job_times"], strict=True):
                bucket = next(b for b in BUCKETS if size >= b[0] and (b[1] is None or size <= b[1]))
                by_bucket[bucket].append(seconds)
        runs[label] = (results, by_bucket, speed)
    drf, slots = runs["DRF"][1], runs["12 slots"][1]
    lines = [
        "",
        "## §7.3 on Facebook's 2010 workload: one hour of SWIM's FB-2010, 400 nodes, 10 users",
        "",
        start("fb2010"),
        "| job size (tasks) | jobs (DRF) | mean time DRF s | jobs (slots) | mean time slots s "
        "| reduction |",
        "|---|---|---|---|---|---|",
    ]
    labels, reductions = [], []
    for b in BUCKETS:
        name = f"{b[0]}-{b[1]}" if b[1] else f">{b[0] - 1}"
        d, s_ = drf[b], slots[b]
        if not d or not s_:
            continue
        md, ms = statistics.fmean(d), statistics.fmean(s_)
        reductions.append(100 * (ms - md) / ms)
        labels.append(name)
        lines.append(
            f"| {name} | {len(d)} | {md:.0f} | {len(s_)} | {ms:.0f} | {reductions[-1]:.0f}% |"
        )
    lines.append(end("fb2010"))
    for label, (results, by_bucket, speed) in runs.items():
        u = {
            r: statistics.fmean(x.get(r, 0.0) for _, x in results.utilisation)
            for r in ("cpus", "mem")
        }
        done = sum(len(v) for v in by_bucket.values())
        lines.append(
            f"\n{label}: {done} jobs done, utilisation cpus {u['cpus']:.0%} mem {u['mem']:.0%}"
        )
        # how fast is this machine's, not the result's: said, not published
        print(
            f"{label}: simulated in {speed['wall_seconds']:.1f} s "
            f"({speed['events_per_second']:,.0f} task events/s)"
        )
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    axes[0].bar(labels, reductions)
    axes[0].set_xlabel("job size (tasks)")
    axes[0].set_ylabel("completion time reduction (%)")
    axes[0].set_title("DRF vs 12 slots (paper Figure 14)")
    for label, (results, _, _) in runs.items():
        for r, style in (("cpus", "-"), ("mem", "--")):
            axes[1].plot([t for t, _ in results.utilisation],
                         [100 * x.get(r, 0.0) for _, x in results.utilisation],
                         style, label=f"{label} {r}")  # fmt: skip
    axes[1].set_xlabel("time (s)")
    axes[1].set_ylabel("allocated (%)")
    axes[1].set_title("utilisation (paper Figure 13)")
    axes[1].legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out / "fb2010-hour-compare.png", dpi=90)
    plt.close(fig)
    return lines


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Replay the paper's comparisons (simulated).")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("out/compare"),
        help="where to write compare.md and the charts (default: out/compare; the "
        "published ones are in examples/experiments/results)",
    )
    main(parser.parse_args().out)
