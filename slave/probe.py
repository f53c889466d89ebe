"""What this machine can offer when `--resources` is not given."""

from __future__ import annotations

import os

from protocol.wire.resources import Resources


def machine_resources(reserve_mb: float | None = None) -> Resources:
    """All cores, and memory less a reserve for the OS (10%, at most 1 GB), as Mesos does."""
    cpus = os.cpu_count() or 1
    total_mb = _mem_total_mb()
    reserve = reserve_mb if reserve_mb is not None else min(1024.0, total_mb * 0.1)
    return Resources(cpus=cpus, mem=max(0.0, round(total_mb - reserve)))


def _mem_total_mb() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 1024.0


def parse_attributes(text: str) -> dict[str, str]:
    """`rack:a;zone:1` -> {"rack": "a", "zone": "1"}."""
    attributes: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.replace(",", ";").split(";"))):
        name, sep, value = part.partition(":")
        if not sep or not name:
            raise ValueError(f"expected name:value, got {part!r}")
        attributes[name.strip()] = value.strip()
    return attributes
