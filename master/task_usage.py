"""What a task (or a custom executor) uses now, from two of its slave's usage reports:
CPU-s/s between them and memory at the last, as resources (`cpus`, `mem` in MB) to set
beside its allocation."""

from __future__ import annotations

from collections.abc import Iterable

from protocol.wire.messages import ContainerUsage
from protocol.wire.resources import Resources

MB = 1024 * 1024


def used_between(before: ContainerUsage | None, after: ContainerUsage) -> Resources:
    """`cpus`: CPU seconds a second between the reports (none before: no cpus yet);
    `mem`: MB held at the last."""
    mem = round(after.memory_bytes / MB, 1)
    if before is None or after.timestamp <= before.timestamp:
        return Resources(mem=mem)
    cpu = (after.cpu_user_seconds + after.cpu_system_seconds) - (
        before.cpu_user_seconds + before.cpu_system_seconds
    )
    return Resources(cpus=round(max(0.0, cpu) / (after.timestamp - before.timestamp), 3), mem=mem)


def summed(used: Iterable[Resources | None]) -> Resources:
    total = Resources()
    for u in used:
        if u is not None:
            total = total + u
    return total
