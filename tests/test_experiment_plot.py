"""`drfmesos experiment plot DIR`: a run's plots drawn again from its folder alone (after
--no-plots, once the plots extra is installed, or on another machine), the same figures
the run drew; `Results.read` gives back what `Results.write` wrote, as far as the plots
read it; a folder without results is refused saying what it lacks, and one an older
drfmesos wrote is drawn but for what it did not keep."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.experiments.cli import experiment, simulate
from cluster.experiments.ideal_timeline import Phase
from cluster.experiments.results import Results, Sample
from protocol.extras import MissingExtra
from protocol.wire.resources import Resources

EXAMPLES = Path(__file__).parent.parent / "examples" / "experiments"
SPEC = EXAMPLES / "lecture-morning-preemption.yaml"  # (a second: an ideal and preemption)


def plot(*args: str) -> Result:
    return CliRunner().invoke(experiment, ["plot", *args])


def simulated(out: Path, *flags: str) -> None:
    done = CliRunner().invoke(simulate, [str(SPEC), "--out", str(out), *flags])
    assert done.exit_code == 0, done.output


def test_plot_draws_again_the_pngs_the_run_drew(tmp_path: Path) -> None:
    run = tmp_path / "run"
    simulated(run)
    pngs = {p.name: p.read_bytes() for p in run.glob("*.png")}
    assert set(pngs) == {"running_tasks.png", "dominant_share.png", "utilisation.png"}
    copy = tmp_path / "copy"  # (copied to a laptop, say, without its plots)
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("*.png"))

    done = plot(str(copy))
    assert done.exit_code == 0, done.output
    assert {p.name: p.read_bytes() for p in copy.glob("*.png")} == pngs  # the same figures
    assert "running_tasks.png" in done.output

    elsewhere = tmp_path / "elsewhere"  # --out: into another folder, DIR left as it is
    done = plot(str(copy), "--out", str(elsewhere))
    assert done.exit_code == 0, done.output
    assert {p.name: p.read_bytes() for p in elsewhere.glob("*.png")} == pngs


def test_a_run_with_no_plots_can_be_plotted_after(tmp_path: Path) -> None:
    simulated(tmp_path, "--no-plots")
    assert not list(tmp_path.glob("*.png"))
    done = plot(str(tmp_path))
    assert done.exit_code == 0, done.output
    assert {p.name for p in tmp_path.glob("*.png")} == {
        "running_tasks.png",
        "dominant_share.png",
        "utilisation.png",
    }


def test_an_empty_folder_is_refused_saying_it_holds_no_results(tmp_path: Path) -> None:
    done = plot(str(tmp_path))
    assert done.exit_code == 1
    assert "holds no experiment's results (no summary.json)" in done.output
    assert done.exception is None or isinstance(done.exception, SystemExit)  # (no traceback)


def test_a_folder_an_older_drfmesos_wrote_is_plotted_but_for_what_it_lacks(
    tmp_path: Path,
) -> None:
    """(The published live runs' folders are such.) Its running tasks and shares are
    drawn again; its utilisation, which it did not keep, is not, and it says so."""
    simulated(tmp_path, "--no-plots")
    (tmp_path / "utilisation.csv").unlink()  # as runs wrote it before this file existed
    done = plot(str(tmp_path))
    assert done.exit_code == 0, done.output
    assert (tmp_path / "running_tasks.png").is_file()
    assert (tmp_path / "dominant_share.png").is_file()
    assert not (tmp_path / "utilisation.png").exists()
    assert "has no utilisation.csv (an older drfmesos wrote it)" in done.output


def test_a_summary_that_is_not_one_is_refused(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text('{"name": "x"}')
    done = plot(str(tmp_path))
    assert done.exit_code == 1
    assert "is not an experiment's summary" in done.output


def test_without_the_plots_extra_it_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    simulated(tmp_path, "--no-plots")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # (its import fails, as uninstalled)
    monkeypatch.delitem(sys.modules, "cluster.experiments.plots", raising=False)
    done = plot(str(tmp_path))
    assert isinstance(done.exception, MissingExtra)
    assert "pip install 'drfmesos[plots]'" in str(done.exception)
    assert "--no-plots" not in str(done.exception)  # (a run's advice, not this command's)


# -- the round trip: what the plots read, written and read back ----------------------------

NAMES = ("a", "b", "c")
TOTAL = Resources({"cpus": 9, "mem": 18432, "gpus": 2})
millis = st.integers(0, 10**7)
times = st.integers(0, 10**7).map(lambda m: m / 1000)  # (the timeline keeps milliseconds)
fractions = st.integers(0, 10**6).map(lambda m: m / 10**6)  # (shares: six places)

samples = st.builds(
    Sample,
    time=times,
    framework=st.sampled_from(NAMES),
    running_tasks=st.integers(0, 10_000),
    allocated=st.dictionaries(st.sampled_from(sorted(TOTAL)), millis).map(Resources.from_millis),
    dominant_share=fractions,
    used_cpus=st.none() | st.integers(0, 10**6).map(lambda m: m / 10**4),
)
phases = st.builds(
    Phase,
    start=times,
    tasks=st.dictionaries(st.sampled_from(NAMES), st.floats(0, 1e6)),
    shares=st.dictionaries(st.sampled_from(NAMES), st.floats(0, 1)),
)
results_written = st.builds(
    Results,
    name=st.text(min_size=1, max_size=20),
    mode=st.sampled_from(["simulated", "live"]),
    policy=st.sampled_from(["drf", "hdrf", "slots"]),
    total=st.just(TOTAL),
    samples=st.lists(samples, max_size=30),
    utilisation=st.lists(
        st.tuples(times, st.dictionaries(st.sampled_from(sorted(TOTAL)), st.floats(0, 1))),
        max_size=30,
    ),
    framework_stats=st.dictionaries(st.sampled_from(NAMES), st.just({"tasks_completed": 1})),
    ideal=st.lists(phases, max_size=4),
    ideal_policy=st.sampled_from(["drf", ""]),
    settle=st.integers(0, 100).map(float),
    preemption=st.none()
    | st.builds(
        lambda ts: {"events": [{"time": t, "victim": "a", "work_lost": 1.0} for t in ts]},
        st.lists(times, max_size=5),
    ),
    stopped_at=st.none() | times,
)


def drawn_from(results: Results) -> dict[str, object]:
    """Everything `cluster.experiments.plots` reads of a Results."""
    names = results.resource_names()
    return {
        "title": (results.name, results.mode, results.policy),
        "resources": names,
        "frameworks": results.frameworks(),
        "samples": results.samples,
        "utilisation": [(t, [u.get(r, 0.0) for r in names]) for t, u in results.utilisation],
        "ideal": results.ideal,
        "preempted": (results.preemption or {}).get("events", []),
        "cpu_use": results.cpu_use() if any(s.used_cpus is not None for s in results.samples)
        else None,
    }  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(results_written)
def test_results_read_back_are_what_the_plots_were_drawn_from(results: Results) -> None:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        results.write(out)
        again = Results.read(out)
    assert drawn_from(again) == drawn_from(results)
    assert (again.ideal_policy, again.settle) == (
        (results.ideal_policy, results.settle) if results.ideal else ("", 0.0)
    )
    assert again.stopped_at == results.stopped_at


def test_a_live_run_that_measured_cpu_gets_its_cpu_used_plot_again(tmp_path: Path) -> None:
    """Real slaves report the CPU tasks used: cpu_used.png is drawn again from the
    timeline's used_cpus."""
    results = Results(name="cpu", mode="live", policy="drf", total=Resources({"cpus": 2}))
    for t in range(5):
        for name, held, used in (("A", 1.5, 1.4), ("B", 0.5, 0.6)):
            sample = Sample(float(t), name, 1, Resources({"cpus": held}), held / 2, used)
            results.samples.append(sample)
        results.utilisation.append((float(t), {"cpus": 1.0}))
    results.write(tmp_path)
    done = plot(str(tmp_path))
    assert done.exit_code == 0, done.output
    assert {p.name for p in tmp_path.glob("*.png")} == {
        "cpu_used.png",
        "running_tasks.png",
        "dominant_share.png",
        "utilisation.png",
    }
