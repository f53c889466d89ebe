"""The books read out for the HTTP side (master.http.reader): counts, shares and usage,
computed from the books and the allocator at one moment, without building `state()`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from master.books import Books
from master.http.reader import BookCounts, ExecutorUsageRow, FrameworkShare, Gauges, TaskUsageRow
from protocol.wire.messages import RoleView


def counts(books: Books) -> BookCounts:
    return BookCounts(
        slaves=len(books.slaves),
        slaves_connected=sum(1 for s in books.slaves.values() if s.connected),
        frameworks=len(books.frameworks),
        offers_outstanding=len(books.offers),
        recovering=len(books.recovering),
        maintenance=Counter(out.status for out in books.maintenance.values()),
    )


@dataclass(frozen=True)
class TaskCounts:
    """The live tasks by state, and those whose health check has said, by its verdict."""

    by_state: dict[str, int]
    by_health: dict[str, int]

    @property
    def live(self) -> int:
        return sum(self.by_state.values())


def task_counts(books: Books) -> TaskCounts:
    """A walk over every live task (200,000 of them take the loop a good part of a second)."""
    by_state: dict[str, int] = {}
    by_health = {"healthy": 0, "unhealthy": 0}
    for fw in books.frameworks.values():
        for task in fw.tasks.values():
            by_state[task.state.value] = by_state.get(task.state.value, 0) + 1
            if task.status is not None and task.status.healthy is not None:
                by_health["healthy" if task.status.healthy else "unhealthy"] += 1
    return TaskCounts(by_state, by_health)


def gauges(
    books: Books,
    tasks: TaskCounts,
    total: Mapping[str, float],
    allocated: Mapping[str, float],
    shares: Mapping[str, float],
    fair: Mapping[str, float],
    roles: list[RoleView],
    bus_stats: Mapping[str, int],
) -> Gauges:
    """`tasks`: the live tasks counted; `shares`: each framework's dominant share; `fair`:
    its fair share, where known."""
    return Gauges(
        tasks_by_health=tasks.by_health,
        counts=counts(books),
        tasks_by_state=tasks.by_state,
        total=total,
        allocated=allocated,
        framework_shares=[
            FrameworkShare(
                fw.framework_id,
                fw.name,
                fw.role,
                shares.get(fw.framework_id, 0.0),
                fair.get(fw.framework_id),
                len(fw.tasks),
            )
            for fw in books.frameworks.values()
        ],
        role_shares=[(view.role, view.share) for view in roles],
        bus_in=bus_stats.get("received", 0),
        bus_out=bus_stats.get("posted", 0) + bus_stats.get("published", 0),
    )


def task_usage(books: Books) -> Iterator[TaskUsageRow]:
    """What each live task uses, as its slave last reported it."""
    for fw in books.frameworks.values():
        for task in fw.tasks.values():
            if task.usage is not None:
                yield TaskUsageRow(fw.framework_id, task.task_id, task.slave_id, task.usage)


def executor_usage(books: Books) -> Iterator[ExecutorUsageRow]:
    """What each live custom executor uses (it and its tasks), as its slave last reported it."""
    for slave in books.slaves.values():
        for (framework_id, executor_id), usage in slave.executor_usage.items():
            yield ExecutorUsageRow(framework_id, executor_id, slave.slave_id, usage)
