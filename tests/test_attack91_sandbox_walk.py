"""A tenant's sandbox of many empty directories (attack91).

When a task that left memory charged ends, the slave's cgroup upkeep walks its sandbox
(`cgroup_upkeep.forget_files`) to write back and drop what it wrote, at each look until
its cgroup goes, in the one thread that removes every tenant's finished cgroups. The walk
was bounded by the files it met (`most`, 10,000), not by the directories: a task that
made 100,000 empty directories in its sandbox cost the slave 1.3 s of CPU (root's,
charged to no task) a look, 2026-12-07 on the 2-core test machine, and every later run of
that task id (its sandbox kept) cost it again, with no more mkdir: the upkeep of every
other tenant's ended tasks waited behind it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from slave.cgroup_upkeep import forget_files


def test_a_sandbox_of_empty_directories_is_walked_no_further_than_most(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    (sandbox / "stdout").write_text("out\n")
    for i in range(3_000):
        (sandbox / f"d{i}").mkdir()
    listed: list[object] = []
    scandir = os.scandir

    def counted(path: int) -> Iterator[os.DirEntry[str]]:
        listed.append(path)
        return scandir(path)

    monkeypatch.setattr(os, "scandir", counted)
    forget_files([sandbox], most=100)
    monkeypatch.undo()
    assert len(listed) <= 101, f"{len(listed)} directories listed for a bound of 100"
