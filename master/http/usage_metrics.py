"""Per-task usage metrics at `/metrics`: what each running task uses, as its slave last
reported it (`UsageReport`, from the task's cgroup), beside what it was allocated.

Counters (CPU seconds) are the slave's totals for the task, so a rate over them is the
task's CPU use; a task's series ends with the task.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from master.http.reader import MasterReader

LABELS = ["framework_id", "task_id", "slave_id"]


class TaskUsageCollector(Collector):
    def __init__(self, master: MasterReader) -> None:
        self.master = master

    def collect(self) -> Iterator[Metric]:
        cpu = CounterMetricFamily(
            "drfmesos_task_cpu_seconds",
            "CPU time a running task used, by mode (user, system).",
            labels=[*LABELS, "mode"],
        )
        throttled = CounterMetricFamily(
            "drfmesos_task_cpu_throttled_seconds",
            "Time a running task was held back by its CPU cap (CFS).",
            labels=LABELS,
        )
        memory = GaugeMetricFamily(
            "drfmesos_task_memory_bytes", "Memory a running task uses now.", labels=LABELS
        )
        peak = GaugeMetricFamily(
            "drfmesos_task_memory_peak_bytes", "The most memory a running task used.", labels=LABELS
        )
        for row in self.master.task_usage():
            u = row.usage
            labels = [row.framework_id, row.task_id, row.slave_id]
            cpu.add_metric([*labels, "user"], u.cpu_user_seconds)
            cpu.add_metric([*labels, "system"], u.cpu_system_seconds)
            throttled.add_metric(labels, u.cpu_throttled_seconds)
            memory.add_metric(labels, u.memory_bytes)
            peak.add_metric(labels, u.memory_peak_bytes)
        yield cpu
        yield throttled
        yield memory
        yield peak
