"""Usage metrics at `/metrics`: what each running command task and custom executor uses,
as its slave last reported it (`UsageReport`, from its cgroup), beside what it was
allocated. A custom executor's container holds it and its tasks: its series are the
executor's (`drfmesos_executor_*`), as Mesos's /monitor/statistics counts them.

Counters (CPU seconds) are the slave's totals for the container, so a rate over them is
its CPU use; a series ends with its task or executor.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from master.http.reader import MasterReader
from protocol.wire.messages import ContainerUsage

Rows = Iterable[tuple[list[str], ContainerUsage]]  # (label values, usage)


class TaskUsageCollector(Collector):
    def __init__(self, master: MasterReader) -> None:
        self.master = master

    def collect(self) -> Iterator[Metric]:
        tasks = (
            ([r.framework_id, r.task_id, r.slave_id], r.usage) for r in self.master.task_usage()
        )
        yield from families(
            "task", "a running task", ["framework_id", "task_id", "slave_id"], tasks
        )
        executors = (
            ([r.framework_id, r.executor_id, r.slave_id], r.usage)
            for r in self.master.executor_usage()
        )
        labels = ["framework_id", "executor_id", "slave_id"]
        yield from families("executor", "a custom executor (with its tasks)", labels, executors)


def families(kind: str, what: str, labels: list[str], rows: Rows) -> list[Metric]:
    """The four series of one kind of container (`drfmesos_<kind>_...`)."""
    cpu = CounterMetricFamily(
        f"drfmesos_{kind}_cpu_seconds",
        f"CPU time {what} used, by mode (user, system).",
        labels=[*labels, "mode"],
    )
    throttled = CounterMetricFamily(
        f"drfmesos_{kind}_cpu_throttled_seconds",
        f"Time {what} was held back by its CPU cap (CFS).",
        labels=labels,
    )
    memory = GaugeMetricFamily(
        f"drfmesos_{kind}_memory_bytes", f"Memory {what} uses now.", labels=labels
    )
    peak = GaugeMetricFamily(
        f"drfmesos_{kind}_memory_peak_bytes", f"The most memory {what} used.", labels=labels
    )
    for values, u in rows:
        cpu.add_metric([*values, "user"], u.cpu_user_seconds)
        cpu.add_metric([*values, "system"], u.cpu_system_seconds)
        throttled.add_metric(values, u.cpu_throttled_seconds)
        memory.add_metric(values, u.memory_bytes)
        peak.add_metric(values, u.memory_peak_bytes)
    return [cpu, throttled, memory, peak]
