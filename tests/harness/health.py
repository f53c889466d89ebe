"""What a framework heard of its tasks' health checks: the tests of the slave's checks
(command tasks) and of the executor driver's (executors' tasks) read them alike."""

from __future__ import annotations

from protocol.wire.messages import Reason, TaskState, TaskStatus, Update

from harness.fakes import FakeFramework

HEALTH = Reason.TASK_HEALTH_CHECK_STATUS_UPDATED


def statuses(fw: FakeFramework, task_id: str) -> list[TaskStatus]:
    return [u.status for u in fw.inbox.of(Update) if u.status.task_id == task_id]


async def verdict(fw: FakeFramework, task_id: str, healthy: bool) -> TaskStatus:
    """The health update that says `healthy` (a TASK_RUNNING)."""
    said = (task_id, HEALTH, healthy)
    found = await fw.inbox.wait_for(
        Update, lambda u: (u.status.task_id, u.status.reason, u.status.healthy) == said, timeout=20
    )
    assert found.status.state == TaskState.RUNNING
    return found.status
