"""SWIM's Facebook workloads as jobs: the task model, stages in order, and the replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.experiments.spec import Framework, load_spec
from cluster.experiments.swim import MB, SwimSpec, job_of, read_swim
from cluster.experiments.workload import Workload
from protocol.wire.resources import Resources

DATA = Path(__file__).parent.parent / "examples" / "experiments" / "traces" / "swim"
FB2010 = DATA / "FB-2010_samples_24_times_1hr_0.tsv"
EXAMPLES = Path(__file__).parent.parent / "examples" / "experiments"


def test_the_task_model_turns_bytes_into_maps_and_reduces(tmp_path: Path) -> None:
    spec = SwimSpec(file=tmp_path / "none.tsv")
    tiny = job_of(spec, 0.0, 1762, 0)  # less than a block, no shuffle: one short map
    assert (tiny.maps.tasks, tiny.reduces) == (1, None)
    assert tiny.maps.duration == spec.min_seconds
    big = job_of(spec, 5.0, 1000 * 128 * MB, 3.5 * 1024 * MB)
    assert big.maps.tasks == 1000
    assert big.maps.duration == pytest.approx(128 / 8)  # a block at 8 MB/s
    assert big.reduces is not None
    assert big.reduces.tasks == 4  # one per GB of shuffle, rounded up
    assert big.reduces.duration == pytest.approx(3.5 * 1024 / 4 / 4)
    assert big.maps.task == Resources(cpus=1.5, mem=1024)  # CPU-heavy maps
    assert big.reduces.task == Resources(cpus=1, mem=4096)  # memory-heavy reduces


def test_reduces_start_when_the_maps_are_done(tmp_path: Path) -> None:
    trace = tmp_path / "w.tsv"
    trace.write_text(f"job0\t0\t0\t{2 * 128 * MB}\t{1024 * MB}\t0\n")
    fw = Framework(name="u", swim=SwimSpec(file=trace), tasks_per_offer="fill")
    w = Workload(fw, seed=1)
    maps = w.take(0.0, Resources(cpus=100, mem=100_000))
    assert [p.resources for p in maps] == [Resources(cpus=1.5, mem=1024)] * 2
    assert not w.wants(0.0)  # the reduce waits for both maps
    w.finished(16.0, maps[0])
    assert not w.wants(16.0)
    w.finished(17.0, maps[1])
    (reduce,) = w.take(17.0, Resources(cpus=100, mem=100_000))
    assert reduce.resources == Resources(cpus=1, mem=4096)
    w.finished(100.0, reduce)
    assert w.stats.job_times == [100.0]
    assert w.stats.job_sizes == [3]


@pytest.mark.skipif(not FB2010.exists(), reason="the SWIM data is not beside the repository")
def test_facebook_2010_splits_among_users_and_windows() -> None:
    hour = [read_swim(SwimSpec(file=FB2010, users=10, user=u, hours=1)) for u in range(10)]
    jobs = sum(len(h) for h in hour)
    with FB2010.open() as f:
        first_hour = sum(1 for line in f if float(line.split("\t")[1]) < 3600)
    assert jobs == first_hour
    assert all(0 <= j.submit < 3600 for h in hour for j in h)
    later = read_swim(SwimSpec(file=FB2010, start=3600, hours=1))
    assert later
    assert all(0 <= j.submit < 3600 for j in later)  # relative to the window's start
    spec = load_spec(EXAMPLES / "fb2010-hour.yaml")
    assert [f.swim.user for f in spec.frameworks if f.swim] == list(range(10))


def test_every_spec_reads_its_traces_from_inside_the_checkout() -> None:
    """A clone has everything the examples replay: no spec names a file outside it (the
    FB-2010 specs read ../../../shared/data/swim once, which a user's clone lacks)."""
    root = EXAMPLES.parent.parent.resolve()
    for path in sorted(EXAMPLES.glob("*.yaml")):
        spec = load_spec(path)  # (a missing SWIM file is refused here)
        for fw in spec.frameworks:
            files = [fw.trace, fw.swim.file if fw.swim else None]
            files += [fw.duration.trace if fw.duration else None]
            for file in filter(None, files):
                assert file.resolve().is_relative_to(root), (path.name, file)
                assert file.exists(), (path.name, file)
    assert (DATA / "LICENSE").exists()  # SWIM's BSD licence travels with its data
