"""Which task state a framework hears, as Mesos 1.x decides it (no I/O).

Since Mesos 1.1 a framework that declares the PARTITION_AWARE capability hears the finer
states -- TASK_DROPPED, TASK_UNREACHABLE, TASK_GONE, TASK_GONE_BY_OPERATOR, TASK_UNKNOWN --
and every other framework hears TASK_LOST in their place (src/master/master.cpp). The
master decides the fine state once and maps it here, per framework.
"""

from __future__ import annotations

from protocol.wire.messages import Reason, TaskState

PARTITION_AWARE_ONLY = frozenset(
    {
        TaskState.DROPPED,
        TaskState.UNREACHABLE,
        TaskState.GONE,
        TaskState.GONE_BY_OPERATOR,
        TaskState.UNKNOWN,
    }
)


def as_seen(
    state: TaskState, reason: Reason | None, partition_aware: bool
) -> tuple[TaskState, Reason | None]:
    """The (state, reason) a framework hears for the master's fine (state, reason)."""
    if partition_aware or state not in PARTITION_AWARE_ONLY:
        return state, reason
    if reason == Reason.SLAVE_REMOVED_BY_OPERATOR:  # as __removeSlave: LOST, SLAVE_REMOVED
        reason = Reason.SLAVE_REMOVED
    return TaskState.LOST, reason


def unknown_task(
    slave_id: str | None, *, registered: bool, unreachable: bool, gone: bool
) -> tuple[TaskState, str]:
    """Explicit reconciliation of a task the master does not know, by what it knows of the
    slave named (Master::_reconcileTasks, cases 3 to 6; case 2, a slave still recovering
    after a failover, gets no answer and is the caller's to tell apart)."""
    if slave_id is not None and registered:
        return TaskState.GONE, "Reconciliation: Task is unknown to the slave"
    if slave_id is not None and unreachable:
        return TaskState.UNREACHABLE, "Reconciliation: Task is unreachable"
    if slave_id is not None and gone:
        return TaskState.GONE_BY_OPERATOR, "Reconciliation: Task is gone"
    return TaskState.UNKNOWN, "Reconciliation: Task is unknown"


# How far a task has come on its slave, for the states a slave reports before the end: an
# update of a lower rank than what its framework heard already is stale (a late re-send)
PROGRESS = {TaskState.STAGING: 0, TaskState.STARTING: 1, TaskState.RUNNING: 2, TaskState.KILLING: 3}


def regresses(state: TaskState, heard: TaskState) -> bool:
    """Whether an update to `state` goes back on `heard`, the state its framework has
    heard of the task (states outside the slave's ordinary course never do)."""
    if state not in PROGRESS or heard not in PROGRESS:
        return False
    return PROGRESS[state] < PROGRESS[heard]
