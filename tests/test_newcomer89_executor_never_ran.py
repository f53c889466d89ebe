"""An executor whose program its task's user cannot run (the slave's Python under /root,
mode 700) exits 126 before it says a word: the task's message says what that means and
where the fix is, not only the bare read error of a line that never opened."""

from unittest.mock import MagicMock

from structlog.testing import capture_logs

from frameworks.samples.drf_demo import DemoConfig, DRFDemoScheduler
from protocol.wire.messages import Reason, TaskState, TaskStatus
from slave.executor_side import exit_detail


def test_status_126_names_the_unreachable_python_and_the_fix() -> None:
    detail = exit_detail("drf-demo-A", 126, "0 bytes read on a total of 4 expected bytes")
    assert detail.startswith("executor drf-demo-A exited with status 126: ")
    assert "isolation.python_unreachable" in detail
    assert "--task-env DRFMESOS_PYTHON" in detail
    assert "expected bytes" not in detail


def test_status_127_says_not_found() -> None:
    assert "not found" in exit_detail("e", 127, None)


def test_other_statuses_keep_why_the_line_broke() -> None:
    assert exit_detail("e", 1, "reset") == "executor e exited with status 1 (stopped: reset)"
    assert exit_detail("e", 0, None) == "executor e exited with status 0"


async def test_the_demo_framework_says_why_its_task_failed_where_a_team_sees_it() -> None:
    """drf-demo logged a failed task as it did a finished one, at info and without its
    reason or message (newcomer91: 90 TASK_FAILED and, under --log-level warning,
    nothing): a task that did not finish is a warning with the slave's words."""
    demo = DRFDemoScheduler(DemoConfig(name="A"))
    failed = TaskStatus(
        task_id="A-1", state=TaskState.FAILED, reason=Reason.EXECUTOR_TERMINATED,
        message=exit_detail("drf-demo-A", 126, None),
    )  # fmt: skip
    with capture_logs() as logs:
        await demo.status_update(MagicMock(), failed)
        await demo.status_update(MagicMock(), TaskStatus(task_id="A-2", state=TaskState.FINISHED))
    said = {e["task_id"]: e for e in logs}
    assert said["A-1"]["log_level"] == "warning"
    assert said["A-1"]["reason"] == "REASON_EXECUTOR_TERMINATED"
    assert "isolation.python_unreachable" in said["A-1"]["message"]
    assert said.get("A-2", {"log_level": "info"})["log_level"] == "info"  # (if heard at all)
