"""The published simulated figures are the code's: the one command that makes them
(`examples/experiments/replay-all.sh --simulated`: every simulation, and compare.py's
tables of the paper's comparisons) is run, and what it made must be the committed files
to the character, so a change that moves a figure fails here until the results (and the
docs, which include them) are made again; and beside them no other, so a file no run makes
any more (an earlier run's why.json) is not published as if it were. Plots are drawn from
these numbers; a PNG's bytes depend on matplotlib's version, so they are only checked to
be there. (The live runs' results are measurements of one machine on one day: they are
not replayed.)"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = ROOT / "examples" / "experiments"
PUBLISHED = EXPERIMENTS / "results"
REMAKE = "bash examples/experiments/replay-all.sh --simulated"


@pytest.mark.slow(80)
@pytest.mark.timeout(900)  # (75 CPU-seconds alone; a loaded CI machine gives it half a core)
def test_the_published_simulated_results_are_what_the_code_makes_today(tmp_path: Path) -> None:
    scripts = str(Path(sys.executable).parent)  # drfmesos and python of this install
    # its own session: on a timeout the whole group goes (compare.py and the simulations
    # under bash), not bash alone
    proc = subprocess.Popen(
        ["bash", str(EXPERIMENTS / "replay-all.sh"), "--simulated", "--out", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg",
             "PATH": f"{scripts}:{os.environ['PATH']}"},
    )  # fmt: skip
    try:
        _, stderr = proc.communicate(timeout=840)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert proc.returncode == 0, stderr
    made = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert made, "replay-all.sh --simulated made nothing"
    stale = [
        str(path)
        for path in made
        if path.suffix in (".md", ".json", ".csv")
        and (tmp_path / path).read_text() != (PUBLISHED / path).read_text()
    ]
    assert not stale, f"stale published results: {stale}; run `{REMAKE}`"
    missing = [str(p) for p in made if not (PUBLISHED / p).exists()]
    assert not missing, f"made but not published: {missing}; run `{REMAKE}`"
    # (a file beside them the replay no longer makes, such as an earlier run's why.json)
    left = [
        str(path.relative_to(PUBLISHED))
        for folder in {p.parent for p in made}
        for path in sorted((PUBLISHED / folder).iterdir())
        if path.suffix in (".md", ".json", ".csv") and path.relative_to(PUBLISHED) not in made
    ]
    assert not left, f"published but no longer made: {left}; remove them"


def test_compare_writes_nothing_into_the_published_results_by_default(tmp_path: Path) -> None:
    """Its default --out is out/compare under the working directory (git-ignored): run
    with a spec folder that makes it fail at once, it has written nothing published."""
    copy = tmp_path / "experiments"
    copy.mkdir()
    shutil.copy(EXPERIMENTS / "compare.py", copy)
    done = subprocess.run(
        [sys.executable, str(copy / "compare.py")],  # (no specs beside this copy)
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode != 0  # the specs are not beside it
    assert (tmp_path / "out" / "compare").is_dir()  # where it would have written
    assert not (copy / "results").exists()
