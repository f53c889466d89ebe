"""Paths a slave builds from ids that other parties chose.

A framework picks its task and executor ids; the master checks them, and the slave
checks again here, because a path that leaves the work dir lets a tenant write files
anywhere the slave may (as Mesos's agent does, nothing is created before this check).
"""

from __future__ import annotations

from pathlib import Path

from protocol.wire.ids import check_id

EXECUTOR = "executor-"  # an executor's sandbox: `executor-<executor id>`
ESCAPED = "%"  # before a task id that could read as an executor's sandbox's name


def task_sandbox_name(task_id: str) -> str:
    """A task's sandbox's name: its id, unless the id reads as an executor's sandbox's
    (`executor-X`, which was executor X's own) or as an escaped name: then `%` before
    it. No task's name is ever an executor's, and no two tasks share one."""
    return ESCAPED + task_id if task_id.startswith((EXECUTOR, ESCAPED)) else task_id


def executor_sandbox_name(executor_id: str) -> str:
    return EXECUTOR + executor_id


def task_sandbox(work_dir: Path, framework_id: str, task_id: str) -> Path:
    check_id(task_id, "task id")
    return _sandbox_path(work_dir, framework_id, task_sandbox_name(task_id))


def executor_sandbox(work_dir: Path, framework_id: str, executor_id: str) -> Path:
    check_id(executor_id, "executor id")
    return _sandbox_path(work_dir, framework_id, executor_sandbox_name(executor_id))


def _sandbox_path(work_dir: Path, framework_id: str, name: str) -> Path:
    """`work_dir/sandboxes/<framework_id>/<name>` (a name made above from a checked id),
    or ValueError if the framework id is not a valid id or the path, resolved, would not
    lie under the sandboxes directory."""
    check_id(framework_id, "framework id")
    root = (work_dir / "sandboxes").resolve()
    path = (root / framework_id / name).resolve()
    if path.parent.parent != root:  # (a symlink planted on the way would end elsewhere)
        raise ValueError(f"sandbox {name!r} of {framework_id!r} would lie outside {root}")
    return path


def run_dir_path(work_dir: Path, framework_id: str, task_id: str) -> Path:
    """`work_dir/runs/<framework_id>/<task_id>`: what the slave keeps of a task's run
    (its exit status), apart from its sandbox, which is the task's (its symlinks too)."""
    check_id(framework_id, "framework id")
    check_id(task_id, "task id")
    return work_dir / "runs" / framework_id / task_id
