"""Harnesses for tests and benchmarks (a throwaway ZooKeeper, an HA cluster to break); not in
the wheel."""

from __future__ import annotations

import os
from pathlib import Path


def reachable(path: Path) -> None:
    """Let other users pass through `path` and the directories above it in /tmp (pytest
    and mkdtemp make them 0700): a slave that runs tasks as other users keeps its work
    dir there, and its tasks reach their sandboxes (and a harness's shared directories)
    by path, as under /var/lib."""
    for directory in [path, *path.parents]:
        if directory == Path("/tmp") or Path("/tmp") not in directory.parents:
            break
        os.chmod(directory, directory.stat().st_mode | 0o001)
