"""The task-state rules themselves (no cluster): what a framework hears, and what a state
tells it to do (examples/task-states.md)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from frameworks.samples.journaled import JournaledConfig, JournaledScheduler, is_over
from master.task_states import PARTITION_AWARE_ONLY, as_seen
from protocol.wire.messages import Reason, TaskState


@given(st.sampled_from(TaskState), st.none() | st.sampled_from(Reason))
def test_only_a_partition_aware_framework_hears_the_finer_states(
    state: TaskState, reason: Reason | None
) -> None:
    assert as_seen(state, reason, partition_aware=True) == (state, reason)
    heard, why = as_seen(state, reason, partition_aware=False)
    assert heard not in PARTITION_AWARE_ONLY
    if state in PARTITION_AWARE_ONLY:
        assert heard == TaskState.LOST
        assert why != Reason.SLAVE_REMOVED_BY_OPERATOR  # a Mesos 1.0 reason instead
    else:
        assert (heard, why) == (state, reason)


def test_what_each_state_tells_a_framework() -> None:
    for state in TaskState:
        assert not state.retryable or state.terminal  # a retry only once it is over
    assert {s for s in TaskState if s.terminal and s.may_be_running} == {
        TaskState.LOST,
        TaskState.GONE_BY_OPERATOR,
    }
    assert TaskState.ERROR.terminal
    assert not TaskState.ERROR.retryable  # the description is wrong: it fails again
    assert TaskState.DROPPED.retryable
    assert not TaskState.DROPPED.may_be_running
    assert not TaskState.UNREACHABLE.terminal
    assert TaskState.UNREACHABLE.may_be_running
    assert not TaskState.FINISHED.retryable


def test_a_journaled_framework_relaunches_only_work_that_ended_retryably(tmp_path: Path) -> None:
    """After a restart it knows from its journal which work items still need a task."""
    journal = tmp_path / "fw.journal"
    ends = {
        "fw-w00000": "TASK_FINISHED",
        "fw-w00001": "TASK_LOST",
        "fw-w00002": "TASK_ERROR",
        "fw-w00003": "TASK_UNKNOWN",
        "fw-w00004": "TASK_DROPPED",
    }
    lines: list[dict[str, object]] = [{"framework_id": "fw-1"}]
    for item, state in ends.items():
        lines.append({"launch": f"{item}.1", "slave": "s1"})
        over = is_over(TaskState(state))
        lines.append({"task": f"{item}.1", "state": state, "terminal": over})
    lines.append({"launch": "fw-w00005.1", "slave": "s1"})  # under way
    journal.write_text("".join(json.dumps(line) + "\n" for line in lines))
    config = JournaledConfig(name="fw", journal=journal, witness_dir=tmp_path, work=7)
    scheduler = JournaledScheduler(config)
    try:
        # finished and wrong (TASK_ERROR) items are settled; the rest need a task, and
        # the one under way gets none while it may still run
        assert list(scheduler.todo) == [
            "fw-w00001",
            "fw-w00003",
            "fw-w00004",
            "fw-w00005",
            "fw-w00006",
        ]
        assert scheduler._next_task_id() == "fw-w00001.2"  # its second attempt
        scheduler.open["fw-w00001.2"] = ("s1", 0.0)
        assert scheduler._next_task_id() == "fw-w00003.2"
    finally:
        scheduler.close()
