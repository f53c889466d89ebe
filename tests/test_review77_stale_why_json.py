"""Review 77: a simulation in which nobody waited leaves an earlier run's why.json in place,
and two published results hold one the code no longer makes.

Scenario: the tutorial (docs/tutorials/experiments.md) runs `drfmesos simulate
examples/experiments/paper-7.1.yaml --out out/paper-7.1` and says a simulation "in which a
framework waited for offers also writes why.json (none is written when no one did, as in
the §7.1 run below)". A user who replays into the same directory twice (after a change
of spec, policy or version), or who opens the published `results/paper-7.1-sim/`, finds
a why.json all the same: `Results.write` writes why.json only when someone waited and
never removes one that is there. The published `results/paper-7.1-sim/why.json` (job2
"waited 8 s, task-fits-no-slave") and `results/lecture-collusion-lying-sim/why.json` are
such leftovers: today's code makes neither (`replay-all.sh --simulated --out` a fresh
directory; tests/test_published_results.py compares only the files made, so a published
file no longer made is never caught).

The source: the tutorial's own sentence above; why.json is read beside summary.json as
"how long each framework waited for offers, by the reason the master's why gives first".

Why a user relies on it: a why.json beside a run is read as that run's explanation; a
stale one blames a wait on a run that had none (or on a different spec's slaves).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.experiments.simulator import simulate
from cluster.experiments.spec import load_spec

ROOT = Path(__file__).parent.parent
EXAMPLES = ROOT / "examples" / "experiments"
RESULTS = EXAMPLES / "results"


def test_a_run_in_which_nobody_waited_leaves_no_why_json(tmp_path: Path) -> None:
    out = tmp_path / "paper-7.1"
    out.mkdir()
    (out / "why.json").write_text('{"job2": {"task-fits-no-slave": {"seconds": 8.0}}}\n')
    results = simulate(load_spec(EXAMPLES / "paper-7.1.yaml"))[0]
    assert not results.waited  # the tutorial: nobody waits in this run
    results.write(out)
    assert not (out / "why.json").exists(), "an earlier run's why.json is left beside this run"


@pytest.mark.parametrize(
    ("spec", "run"),
    [("paper-7.1", "paper-7.1-sim"), ("lecture-collusion-lying", "lecture-collusion-lying-sim")],
)
def test_the_published_results_hold_only_files_the_code_makes(
    tmp_path: Path, spec: str, run: str
) -> None:
    results = simulate(load_spec(EXAMPLES / f"{spec}.yaml"))[0]
    results.write(tmp_path)
    made = {p.name for p in tmp_path.iterdir() if p.suffix in (".json", ".csv")}
    published = {p.name for p in (RESULTS / run).iterdir() if p.suffix in (".json", ".csv")}
    assert published == made, f"published but not made: {sorted(published - made)}"
