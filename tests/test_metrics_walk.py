"""/metrics at a big cluster: its walk over every task and slave (tasks by state, all
allocated) takes at most a tenth of the master's loop however often it is scraped, while
what is counted without a walk (slaves, each framework's tasks) stays fresh."""

from __future__ import annotations

from pathlib import Path

import pytest

from master.http import read_side, readout
from master.master import MasterConfig

from harness.helpers import in_process_cluster


async def walked_gauges(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    walk_seconds: float,
    between: float = 0.0,
    big: bool = True,
) -> tuple[int, int]:
    """Scrape twice, `between` seconds apart, the walk taking `walk_seconds` (clocks that
    say so), the cluster counted as big (or not): how many walks, and the slaves counted
    by the second scrape after a slave left between them."""
    walks = []
    real = readout.task_counts
    clock = [0.0]

    def counted(books):  # type: ignore[no-untyped-def]
        walks.append(1)
        clock[0] += walk_seconds  # the walk's time, as perf_counter will say it
        return real(books)

    monkeypatch.setattr(readout, "task_counts", counted)
    now = [0.0]
    monkeypatch.setattr(read_side, "monotonic_seconds", lambda: now[0])
    monkeypatch.setattr(read_side, "walk_clock", lambda: clock[0])
    monkeypatch.setattr(read_side, "WALK_REUSED_PAST", 0 if big else 10_000)
    config = MasterConfig(allocation_interval=0.1)
    async with in_process_cluster("walk", tmp_path, config, slaves=2) as c:
        c.master.views.gauges()
        gone = next(iter(c.master.books.slaves.values()))
        c.master.removals.remove_slave(gone, "test")
        now[0] += between
        second = c.master.views.gauges()
    return len(walks), second.counts.slaves


async def test_a_long_walk_is_reused_for_ten_times_its_length(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    walks, slaves = await walked_gauges(tmp_path, monkeypatch, walk_seconds=0.5)
    assert walks == 1  # the second scrape, within 5 s, did not walk again
    assert slaves == 1  # but counted the slaves afresh


async def test_a_walk_is_done_again_once_ten_times_its_length_has_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    walks, slaves = await walked_gauges(tmp_path, monkeypatch, walk_seconds=0.5, between=5.1)
    assert walks == 2
    assert slaves == 1


async def test_a_small_clusters_walk_is_never_reused_however_long_it_took(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (on a loaded machine a walk over a handful of tasks can take 10 ms of wall time)
    walks, _ = await walked_gauges(tmp_path, monkeypatch, walk_seconds=0.5, big=False)
    assert walks == 2
