"""The task-state rules themselves (no cluster): what a framework hears, and what a state
tells it to do (examples/task-states.md)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from master.task_states import PARTITION_AWARE_ONLY, as_seen
from protocol.messages import Reason, TaskState


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
