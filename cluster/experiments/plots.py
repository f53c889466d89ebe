"""PNG plots of an experiment: running tasks, dominant shares and utilisation over time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files, never a window
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.ticker import MaxNLocator

from cluster.experiments.ideal_timeline import Phase
from cluster.experiments.results import Results, Sample


def plot_all(results: Results, out: Path) -> list[Path]:
    used = [_cpu_use(results, out / "cpu_used.png")] if _measured(results) else []
    return [
        *used,
        _per_framework(
            results,
            out / "running_tasks.png",
            "running tasks",
            lambda s: s.running_tasks,
            step=True,
        ),
        _per_framework(
            results,
            out / "dominant_share.png",
            "dominant share",
            lambda s: s.dominant_share,
            percent=True,
        ),
        *([_utilisation(results, out / "utilisation.png")] if results.utilisation else []),
    ]


def _title(results: Results, what: str) -> str:
    return f"{results.name}: {what} ({results.mode}, {results.policy})"


def _per_framework(
    results: Results,
    path: Path,
    label: str,
    value: Callable[[Sample], float],
    step: bool = False,
    percent: bool = False,
) -> Path:
    def ideal_of(name: str) -> Callable[[Phase], float]:
        if step:
            return lambda p: p.tasks.get(name, 0.0)
        return lambda p: p.shares.get(name, 0.0)

    fig, ax = plt.subplots(figsize=(9, 4.2), dpi=100)
    for name in results.frameworks():
        mine = [s for s in results.samples if s.framework == name]
        xs = [s.time for s in mine]
        ys = [value(s) * (100 if percent else 1) for s in mine]
        if step:
            (line,) = ax.step(xs, ys, where="post", label=name, linewidth=1.4)
        else:
            (line,) = ax.plot(xs, ys, label=name, linewidth=1.4)
        if results.ideal and xs:  # the policy's ideal, dashed, in the framework's colour
            ideal_y = ideal_of(name)
            ix = [p.start for p in results.ideal] + [xs[-1]]
            iy = [ideal_y(p) * (100 if percent else 1) for p in results.ideal]
            ax.step(ix, [*iy, iy[-1]], where="post", linestyle="--", linewidth=1.0,
                    color=line.get_color(), alpha=0.8)  # fmt: skip
    events = (results.preemption or {}).get("events", [])
    if events:  # when tasks were preempted (a tick per moment, at the foot of the plot)
        times = sorted({e["time"] for e in events})
        ax.plot(times, [0] * len(times), linestyle="", marker="^", color="black",
                markersize=7, label=f"preempted ({len(events)} tasks)", clip_on=False)  # fmt: skip
    ax.set_xlabel("time (s)")
    ax.set_ylim(bottom=0)
    if step:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(label + (" (%)" if percent else ""))
    ax.set_title(_title(results, label) + ("  (dashed: ideal)" if results.ideal else ""))
    ax.grid(alpha=0.3)
    if len(results.frameworks()) <= 12:
        _legend_beside(ax)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _legend_beside(ax: Axes) -> None:
    """The legend right of the plot, not on it: inside, it hid the lines it names (the
    first framework's plateau, top left, in the blog's runs)."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize="small")


def _measured(results: Results) -> bool:
    return any(s.used_cpus is not None for s in results.samples)


def _cpu_use(results: Results, path: Path) -> Path:
    """Each framework's cpus allocated (solid) and CPU-s/s used (dotted), one colour."""
    fig, ax = plt.subplots(figsize=(9, 4.2), dpi=100)
    for name in results.frameworks():
        mine = [s for s in results.samples if s.framework == name]
        xs = [s.time for s in mine]
        (line,) = ax.step(xs, [s.allocated.get("cpus") or 0.0 for s in mine], where="post",
                          label=f"{name} allocated", linewidth=1.4)  # fmt: skip
        used = [(s.time, s.used_cpus) for s in mine if s.used_cpus is not None]
        ax.plot([t for t, _ in used], [u for _, u in used], linestyle=":", marker=".",
                color=line.get_color(), label=f"{name} used", linewidth=1.4)  # fmt: skip
    ax.set_xlabel("time (s)")
    ax.set_ylim(bottom=0)
    ax.set_ylabel("cpus (used: CPU-s/s)")
    gap = results.cpu_use().get("largest_gap")
    ax.set_title(_title(results, f"CPU used beside allocated (largest share gap {gap:.1%})"))
    ax.grid(alpha=0.3)
    _legend_beside(ax)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _utilisation(results: Results, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(9, 4.2), dpi=100)
    xs = [t for t, _ in results.utilisation]
    for r in results.resource_names():
        ax.plot(xs, [u.get(r, 0.0) * 100 for _, u in results.utilisation], label=r)
    ax.set_ylim(0, 105)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("allocated (%)")
    ax.set_title(_title(results, "cluster utilisation"))
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
