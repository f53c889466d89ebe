"""Helpers shared by the benchmarks: percentiles, a fixed-width table, what the master's
rate limits held, and the CPU time a process (or the whole machine) used."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import statistics
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def bounds(rows: Sequence[tuple[str, str, str, bool]]) -> str:
    """The targets: each figure beside its bound from the same run, and whether it holds."""
    return table(
        ["target", "measured", "bound", "holds"],
        [[what, got, bound, "yes" if ok else "NO"] for what, got, bound, ok in rows],
    )


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if value < 100 else f"{value:,.0f}"
    return str(value)


@dataclass(frozen=True)
class Held:
    """What the master's rate limits did to the calls of a run (/api/v1/limits)."""

    throttled: int
    refused: int
    by_principal: dict[str, tuple[int, int, int]]  # principal -> (handled, throttled, refused)

    def __str__(self) -> str:
        each = ", ".join(
            f"{p}: {h:,} calls handled, {t:,} throttled, {r:,} refused"
            for p, (h, t, r) in sorted(self.by_principal.items())
        )
        return f"throttled {self.throttled:,}, refused {self.refused:,} ({each})"


def held_by_limits(web_ui: str, operator: str = "", secret_file: Path | None = None) -> Held:
    """Ask the master (its web UI's address, as an operator if it has credentials)."""
    request = urllib.request.Request(web_ui + "api/v1/limits")
    if secret_file is not None:
        token = f"{operator}:{secret_file.read_text().strip()}".encode()
        request.add_header("Authorization", "Basic " + base64.b64encode(token).decode())
    with urllib.request.urlopen(request, timeout=30) as answer:
        rows = json.loads(answer.read())["principals"]
    return Held(
        sum(r["throttled"] for r in rows),
        sum(r["refused"] for r in rows),
        {r["principal"]: (r["handled"], r["throttled"], r["refused"]) for r in rows},
    )


async def stop_cluster(procs: Sequence[asyncio.subprocess.Process], broker: Any) -> None:
    """End a benchmark's processes, then its broker (a MosquittoBroker), and clean up."""
    for p in procs:
        p.terminate()
        await p.wait()
    await broker.stop()
    broker.cleanup()


def cpu_seconds(pid: int | None) -> float:
    """A process's CPU time so far, user and system, its threads included (0: gone)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy() -> float:
    """CPU-seconds the whole machine has been busy (every core, every process)."""
    ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")
