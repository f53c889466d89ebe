"""Sandbox directories a slave makes for its tasks' users, many launches at once."""

from __future__ import annotations

import os
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from slave.sandbox import PASSABLE, PRIVATE, make_dir
from slave.task_users import TaskUser


def test_launches_at_once_each_make_their_sandbox_and_share_the_parents(tmp_path: Path) -> None:
    """A framework's first tasks on a fresh slave start together (their sandboxes made in
    threads): each finds `sandboxes/` and its framework's directory missing, and the one
    that makes it second must not fail its task (one did: `File exists`, TASK_FAILED)."""
    owner = TaskUser(os.getuid(), os.getgid())
    with ThreadPoolExecutor(16) as pool:
        for slave in range(20):  # (a race: many fresh slaves, to meet it)
            root = tmp_path / f"work-{slave}" / "sandboxes" / "fw-1"
            paths = [root / f"task-{n}" for n in range(16)]
            list(pool.map(lambda p: make_dir(p, owner), paths))
            assert all(stat.S_IMODE(p.stat().st_mode) == PRIVATE for p in paths)
            assert stat.S_IMODE(root.stat().st_mode) == PASSABLE
            assert stat.S_IMODE(root.parent.stat().st_mode) == PASSABLE
