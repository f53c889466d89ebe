"""What this slave offers: `--resources`, or what this machine has when it is not given,
with a Mesos agent's default ports."""

from __future__ import annotations

import os

from protocol.wire.discrete import (
    DEFAULT_PORTS,
    EMPTY,
    Discrete,
    Ranges,
    parse_resources,
    with_counts,
)
from protocol.wire.reservations import base_of
from protocol.wire.resources import PORTS, Resources, split_text


def slave_resources(text: str | None) -> tuple[Resources, Discrete]:
    """`--resources` (None: this machine's), and its ranges' and sets' values; ports
    31000-32000 unless it names ports, reserved ones too (`ports(svc):[8000-8010]`: the
    default beside them could hand one port to two tasks), as a Mesos agent does."""
    offered, values = parse_resources(text) if text else (machine_resources(), EMPTY)
    if PORTS in {base_of(name) for name, _ in split_text(text or "")}:
        return offered, values
    values = values.add(Discrete({PORTS: Ranges.parse(DEFAULT_PORTS)}))
    return with_counts(offered, values, "--resources"), values


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
