"""An experiment's results, live or simulated: a timeline of samples and a summary.

timeline.csv   time, framework, running_tasks, <resource>..., dominant_share
summary.json   per framework: mean share, mean running tasks, tasks completed,
               mean task wait, jobs completed and their mean response time;
               cluster utilisation per resource
utilisation.csv  time, <resource>...: the share of each resource allocated, over time
why.json       per framework, why it waited (simulated runs): for each reason the master's
               `why` gives first, the seconds it waited for it and how it was first said

`Results.read` reads a folder back as far as the plots need it (`drfmesos experiment plot`).
"""

from __future__ import annotations

import csv
import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster.experiments.ideal_timeline import Ideal, Phase
from protocol.wire.resources import Resources


@dataclass(slots=True)
class Sample:
    time: float
    framework: str
    running_tasks: int
    allocated: Resources
    dominant_share: float
    used_cpus: float | None = None  # CPU-s/s its tasks used (live runs on real slaves)


@dataclass(slots=True)
class Waited:
    """How long a framework waited for one reason, and when and how it was first said."""

    seconds: float
    first_at: float
    message: str


@dataclass
class Results:
    name: str
    mode: str  # "simulated" or "live"
    policy: str
    total: Resources
    samples: list[Sample] = field(default_factory=list)
    utilisation: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    framework_stats: dict[str, dict[str, Any]] = field(default_factory=dict)
    ideal: list[Phase] = field(default_factory=list)  # the policy's ideal, phase by phase
    ideal_policy: str = ""
    settle: float = 0.0  # seconds after a phase starts before the run is compared with it
    preemption: dict[str, Any] | None = None  # counters, when preemption was on
    stopped_at: float | None = None  # a run stopped early (Ctrl-C): spec seconds run
    # per framework, per reason (`master.cycle.why`'s first): how long it waited for it,
    # when first, and what the master said then (simulated runs)
    waited: dict[str, dict[str, Waited]] = field(default_factory=dict)

    def waited_for(
        self, framework: str, code: str, say: Callable[[], str], t: float, seconds: float
    ) -> None:
        """A framework that wanted offers went `seconds` up to `t` without one, for `code`;
        `say()` says it, asked only the first time (the sentence is kept, not its repeats)."""
        mine = self.waited.setdefault(framework, {})
        if code in mine:
            mine[code].seconds += seconds
        else:
            mine[code] = Waited(seconds, t, say())

    def why_waited(self) -> dict[str, Any]:
        """why.json: per framework, each reason it waited for, the longest first."""
        return {
            name: {
                code: {
                    "seconds": round(w.seconds, 3),
                    "first_at": round(w.first_at, 3),
                    "first": w.message,
                }
                for code, w in sorted(codes.items(), key=lambda cw: (-cw[1].seconds, cw[0]))
            }
            for name, codes in sorted(self.waited.items())
        }

    def with_ideal(self, ideal: Ideal) -> Results:
        """Measured against `ideal` (`cluster.experiments.ideal_timeline`); returns self."""
        self.ideal_policy, self.ideal, self.settle = ideal.policy, ideal.phases, ideal.settle
        return self

    def ideal_at(self, t: float) -> Phase | None:
        i = self.phase_index(t)
        return None if i is None else self.ideal[i]

    def phase_index(self, t: float) -> int | None:
        """Which of the ideal's phases holds at `t` (None: before the first)."""
        current = None
        for i, phase in enumerate(self.ideal):
            if phase.start <= t:
                current = i
        return current

    def distance_from_ideal(self) -> dict[str, Any]:
        """Per framework, |real - ideal| running tasks over the settled samples: mean and
        max; and whether every mean is within one task (the paper's bound), or None
        (not measured) where no framework had a sample to measure.

        A phase has settled `settle` seconds after it starts (its longest task has had the
        time to end and be replaced). A phase that ends first -- the next one begins, or
        the run ends, while its tasks still run (tasks that outlast the run) -- is measured
        at its last sample, the allocation it reached, and named in `measured_at_end`: the
        offer loop's steady state is where it stops, not what it would have become."""
        if not self.ideal:
            return {}
        by_phase: list[list[Sample]] = [[] for _ in self.ideal]
        for s in self.samples:
            i = self.phase_index(s.time)
            if i is not None:
                by_phase[i].append(s)
        gaps: dict[str, list[float]] = {}
        at_end = []
        for phase, samples in zip(self.ideal, by_phase, strict=True):
            settled = [s for s in samples if s.time - phase.start >= self.settle]
            if not settled and samples:
                last = max(s.time for s in samples)
                settled = [s for s in samples if s.time == last]
                at_end.append(phase.start)
            for s in settled:
                gap = abs(s.running_tasks - phase.tasks.get(s.framework, 0.0))
                gaps.setdefault(s.framework, []).append(gap)
        per = {
            name: {
                "mean_tasks": round(statistics.fmean(mine), 3),
                "max_tasks": round(max(mine), 3),
                "settled_samples": len(mine),
            }
            for name, mine in sorted(gaps.items())
        }
        return {
            "policy": self.ideal_policy,
            "frameworks": per,
            "settle": self.settle,
            "measured_at_end": at_end,
            "within_one_task": all(v["mean_tasks"] <= 1.0 for v in per.values()) if per else None,
        }

    def frameworks(self) -> list[str]:
        return sorted({s.framework for s in self.samples} | set(self.framework_stats))

    def resource_names(self) -> list[str]:
        return sorted(self.total)

    def summary(self) -> dict[str, Any]:
        per: dict[str, Any] = {}
        for name in self.frameworks():
            mine = [s for s in self.samples if s.framework == name]
            active = [s for s in mine if s.running_tasks > 0] or mine
            stats = self.framework_stats.get(name, {})
            waits = stats.get("waits", [])
            jobs = stats.get("job_times", [])
            per[name] = {
                "mean_share": _mean([s.dominant_share for s in active]),
                "mean_running_tasks": _mean([s.running_tasks for s in active]),
                "tasks_completed": stats.get("tasks_completed", 0),
                "mean_task_wait": _mean(waits),
                "jobs_completed": len(jobs),
                "mean_job_response_time": _mean(jobs),
            }
        utilisation = {
            r: _mean([u.get(r, 0.0) for _, u in self.utilisation]) for r in self.resource_names()
        }
        out: dict[str, Any] = {
            "name": self.name,
            "mode": self.mode,
            "policy": self.policy,
            "total": self.total.to_dict(),
            "frameworks": per,
            "utilisation": utilisation,
        }
        if self.stopped_at is not None:
            out["stopped_at"] = round(self.stopped_at, 3)
        if self.ideal:
            out["ideal"] = [
                {"from": p.start, "tasks": p.tasks, "dominant_share": p.shares} for p in self.ideal
            ]
            out["distance_from_ideal"] = self.distance_from_ideal()
        if self.preemption is not None:
            out["preemption"] = self.preemption
        if any(s.used_cpus is not None for s in self.samples):
            out["cpu_use"] = self.cpu_use()
        return out

    def cpu_use(self, within: float = 0.10) -> dict[str, Any]:
        """Does each framework's share of the CPU its tasks used follow its share of the
        cpus allocated? Per framework, over the samples where every framework running
        tasks had reported and no allocation had changed since the sample before: mean
        cpus allocated and used, and the mean share of each among the frameworks; the
        largest gap between the two shares, and whether it is within `within` (of the
        whole)."""
        by_time: dict[float, list[Sample]] = {}
        for s in self.samples:
            by_time.setdefault(s.time, []).append(s)
        rows: dict[str, list[tuple[float, float, float, float]]] = {}
        before: dict[str, float] = {}
        for _, samples in sorted(by_time.items()):
            busy = [s for s in samples if s.allocated.get("cpus")]
            now = {s.framework: s.allocated.get("cpus") or 0.0 for s in samples}
            # a rate whose interval saw the allocation change measures neither allocation
            settled = all(before.get(s.framework) == now[s.framework] for s in busy)
            before = now
            # (a task's first report has no rate yet: a busy framework at 0 is unmeasured)
            if len(busy) < 2 or not settled or any(not s.used_cpus for s in busy):
                continue
            alloc = sum(s.allocated.get("cpus") or 0.0 for s in busy)
            used = sum(s.used_cpus or 0.0 for s in busy)
            if used <= 0:
                continue
            for s in busy:
                a, u = s.allocated.get("cpus") or 0.0, s.used_cpus or 0.0
                rows.setdefault(s.framework, []).append((a, u, a / alloc, u / used))
        per = {
            name: {
                "mean_cpus_allocated": _mean([r[0] for r in rs]),
                "mean_cpus_used": _mean([r[1] for r in rs]),
                "allocated_share": _mean([r[2] for r in rs]),
                "used_share": _mean([r[3] for r in rs]),
                "samples": len(rs),
            }
            for name, rs in sorted(rows.items())
        }
        gap = max((abs(v["used_share"] - v["allocated_share"]) for v in per.values()), default=0)
        return {
            "frameworks": per,
            "largest_gap": round(gap, 4),
            "within": within,
            "follows_allocation": bool(per) and gap <= within,
        }

    def timeline_rows(self) -> list[dict[str, Any]]:
        names = self.resource_names()
        return [
            {
                "time": round(s.time, 3),
                "framework": s.framework,
                "running_tasks": s.running_tasks,
                **{r: s.allocated.get(r, 0.0) for r in names},
                "dominant_share": round(s.dominant_share, 6),
                **({} if s.used_cpus is None else {"used_cpus": round(s.used_cpus, 4)}),
            }
            for s in self.samples
        ]

    def write(self, out: Path) -> dict[str, Any]:
        """The timeline and utilisation (CSV), the summary (JSON) and why.json (an earlier
        one removed when nobody waited) into `out`; the summary. (Plots are
        `cluster.experiments.plots`', which reads results: they are drawn after, from
        `Results.read(out)`.)"""
        out.mkdir(parents=True, exist_ok=True)
        rows = self.timeline_rows()
        with (out / "timeline.csv").open("w", newline="") as f:
            fields = [
                "time",
                "framework",
                "running_tasks",
                *self.resource_names(),
                "dominant_share",
            ]
            if any(s.used_cpus is not None for s in self.samples):
                fields.append("used_cpus")
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)
        # (each share as it is, not rounded: utilisation.png drawn from it is the one the
        # run's own numbers draw)
        with (out / UTILISATION).open("w", newline="") as f:
            lines = csv.writer(f)
            lines.writerow(["time", *self.resource_names()])
            lines.writerows(
                [round(t, 3), *(u.get(r, 0.0) for r in self.resource_names())]
                for t, u in self.utilisation
            )
        summary = self.summary()
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        why = out / "why.json"
        if self.waited:
            why.write_text(json.dumps(self.why_waited(), indent=2) + "\n")
        else:  # (an earlier run's, into the same directory, is not this run's)
            why.unlink(missing_ok=True)
        return summary

    @classmethod
    def read(cls, out: Path) -> Results:
        """What `write` wrote into `out`, as far as the plots draw it: the name, kind of run,
        policy and totals, every sample (at the timeline's precision), the utilisation,
        the ideal's phases and preemption's events. Each framework's waits and jobs are
        not kept (summary.json has their means): `summary()` of what this returns is not
        the summary written. A folder an older drfmesos wrote (before utilisation.csv) reads
        with no utilisation (its plot is not drawn). Raises NotResults, saying what is
        missing, for a folder without results."""
        summary_path, timeline_path = out / "summary.json", out / "timeline.csv"
        utilisation_path = out / UTILISATION
        if not summary_path.is_file():
            raise NotResults(
                f"{out} holds no experiment's results (no summary.json): give the --out "
                "folder of drfmesos simulate or drfmesos experiment run"
            )
        try:
            summary = json.loads(summary_path.read_text())
            results = cls(
                name=summary["name"],
                mode=summary["mode"],
                policy=summary["policy"],
                total=Resources(summary["total"]),
                framework_stats={name: {} for name in summary["frameworks"]},
                preemption=summary.get("preemption"),
                stopped_at=summary.get("stopped_at"),
            )
            ideal = summary.get("ideal", [])
            results.ideal = [Phase(p["from"], p["tasks"], p["dominant_share"]) for p in ideal]
            distance = summary.get("distance_from_ideal") or {}
            results.ideal_policy = distance.get("policy", "")
            results.settle = distance.get("settle", 0.0)
        except (ValueError, KeyError, TypeError) as e:  # (JSON's errors are ValueErrors)
            raise NotResults(f"{summary_path} is not an experiment's summary ({e!r})") from None
        if not timeline_path.is_file():
            raise NotResults(f"{out} has summary.json but no {timeline_path.name}")
        names = results.resource_names()
        try:
            with timeline_path.open(newline="") as f:
                results.samples = [
                    Sample(
                        float(row["time"]),
                        row["framework"],
                        int(row["running_tasks"]),
                        Resources({r: float(row[r]) for r in names}),
                        float(row["dominant_share"]),
                        float(used) if (used := row.get("used_cpus")) else None,
                    )
                    for row in csv.DictReader(f)
                ]
            if utilisation_path.is_file():  # (an older drfmesos wrote none)
                with utilisation_path.open(newline="") as f:
                    rows = csv.DictReader(f)
                    results.utilisation = [
                        (float(row.pop("time")), {r: float(v) for r, v in row.items()})
                        for row in rows
                    ]
        except (ValueError, KeyError, TypeError) as e:
            raise NotResults(f"{out}'s CSV files do not read ({e!r})") from None
        return results


class NotResults(ValueError):
    """A folder `Results.read` cannot plot: the message says what it lacks."""


UTILISATION = "utilisation.csv"


def _mean(values: list[float] | list[int]) -> float:
    return round(statistics.fmean(values), 6) if values else 0.0
