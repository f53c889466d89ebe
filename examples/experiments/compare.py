"""The paper's comparisons, simulated: §7.2 (DRF vs 3-6 slots per node vs CPU-only) and
§7.3 (DRF vs slots on the 400-node trace). Writes a table (compare.md) and bar charts.

    python examples/experiments/compare.py [--out examples/experiments/results]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from cluster.simulator import simulate
from cluster.spec import Master, load_spec

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
            f"| {label} | {sj} | {lj} | {st:.0f} | {lt:.0f} | {u['cpus']:.0%} | {u['mem']:.0%} |"
        )
        bars["small"].append(sj)
        bars["large"].append(lj)
        bars["small_t"].append(st)
        bars["large_t"].append(lt)
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
    (out / "compare.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Replay the paper's comparisons (simulated).")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    main(parser.parse_args().out)
