"""A live experiment says what it is doing while it runs (it printed nothing for 34 s,
then its summary), and Ctrl-C stops it keeping what it sampled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "examples" / "experiments" / "blog-same-demands.yaml"


@pytest.mark.slow(25)
def test_a_live_experiment_shows_progress_and_ctrl_c_keeps_what_it_has(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cluster", "experiment", "run", str(SPEC), "--time-scale",
         "0.05", "--out", str(out), "--no-plots"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    seen: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # (stderr is no terminal here: a line a tenth of the run)
            seen.append(line)
            if "(20%)" in line:
                os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C, to the whole foreground group
                break
        rest, _ = proc.communicate(timeout=60)
        seen.append(rest)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = "".join(seen)
    assert "starting a broker, a master and 3 slaves" in text, text
    assert "cluster up in" in text, text
    assert "(10%)" in text, text
    assert proc.returncode == 0, text
    assert "stopped at" in text, text
    summary = json.loads((out / "summary.json").read_text())
    assert 240 <= summary["stopped_at"] < 600  # 20% of the spec's 1,200 s, and a moment
    assert set(summary["frameworks"]) == {"A"}  # B comes at 300 s: not yet
    assert len((out / "timeline.csv").read_text().splitlines()) > 10
