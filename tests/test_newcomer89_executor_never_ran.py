"""An executor whose program its task's user cannot run (the slave's Python under /root,
mode 700) exits 126 before it says a word: the task's message says what that means and
where the fix is, not only the bare read error of a line that never opened."""

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
