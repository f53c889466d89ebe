"""A task's record holds its runner, and the runner the report its slave gave it: that
report must not hold the record, or every task leaves a reference cycle behind it (its
record, runner, task info and timer, some 17 objects) that only the cyclic collector
frees. In benchmarks.e2e that collector took 7-9% of the slaves' process's CPU."""

from __future__ import annotations

import gc
import weakref
from typing import Any, cast

from protocol.wire.messages import CommandInfo, TaskInfo, TaskState
from protocol.wire.resources import Resources
from slave.config import TaskRecord
from slave.reports import TaskReports
from slave.runners import SimulatedRunner


def test_a_tasks_record_is_freed_with_its_last_reference_not_by_the_collector() -> None:
    def nothing(*_: Any) -> None:
        return None

    reports = TaskReports(
        "s1",
        {},
        set(),
        cast(Any, None),
        cast(Any, None),
        forget=nothing,
        ended=cast(Any, nothing),
        checkpoint=nothing,
        uncheckpoint=nothing,
    )
    info = TaskInfo(
        task_id="t1", slave_id="s1", resources=Resources(cpus=1), command=CommandInfo(value="true")
    )
    record = TaskRecord("f1", info, TaskState.STAGING)
    record.runner = SimulatedRunner(info, reports.reporter(record))
    gone = weakref.ref(record)
    gc.disable()
    try:
        del record
        assert gone() is None  # freed by its reference count, at once
    finally:
        gc.enable()
