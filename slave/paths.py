"""Paths a slave builds from ids that other parties chose.

A framework picks its task and executor ids; the master checks them, and the slave
checks again here, because a path that leaves the work dir lets a tenant write files
anywhere the slave may (as Mesos's agent does, nothing is created before this check).
"""

from __future__ import annotations

from pathlib import Path

from protocol.wire.ids import check_id


def sandbox_path(work_dir: Path, framework_id: str, name: str) -> Path:
    """`work_dir/sandboxes/<framework_id>/<name>`, or ValueError if either id is not a
    valid id or the path, resolved, would not lie under the sandboxes directory."""
    check_id(framework_id, "framework id")
    check_id(name, "sandbox name")
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
