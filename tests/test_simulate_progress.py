"""`drfmesos simulate` on a terminal shows how far a long run is (simulated seconds done
and to go, time taken and left), and Ctrl-C stops it keeping what it has: its results
are written and say where it stopped. Not on a terminal, it prints no progress."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

EXAMPLES = Path(__file__).parent.parent / "examples" / "experiments"
LONG = EXAMPLES / "paper-7.3.yaml"  # 2,400 simulated s of 400 nodes: tens of seconds
# 100 simulated seconds or more: past the first samples (one each 10 s)
MOVING = re.compile(rb"[1-9][0-9,]{2,} s simulated, [0-9,]+ s to go")


def test_a_long_simulation_shows_its_progress_and_ctrl_c_keeps_its_partial_results(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    terminal, side = pty.openpty()
    command = [sys.executable, "-m", "cluster", "simulate", str(LONG), "--out", str(out)]
    proc = subprocess.Popen([*command, "--no-plots"], stdin=side, stdout=side, stderr=side)
    os.close(side)
    seen, interrupted = b"", False
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            ready, _, _ = select.select([terminal], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(terminal, 65536)
                except OSError:  # (the process is gone and its side closed)
                    break
                if not chunk:
                    break
                seen += chunk
            if not interrupted and MOVING.search(seen):  # the bar is up, the run well on
                proc.send_signal(signal.SIGINT)
                interrupted = True
            if proc.poll() is not None and not ready:
                break
        assert proc.wait(timeout=60) == 0, seen.decode(errors="replace")[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(terminal)
    text = seen.decode(errors="replace")
    assert "simulating paper-7.3" in text
    assert "s simulated" in text
    assert interrupted
    assert "the results cover the part that ran" in text
    summary = json.loads((out / "summary.json").read_text())
    assert 0 < summary["stopped_at"] < 2400
    timeline = (out / "timeline.csv").read_text().splitlines()
    assert len(timeline) > 1  # what it had, kept
    assert any(f["mean_running_tasks"] > 0 for f in summary["frameworks"].values())


def test_no_progress_is_printed_when_not_on_a_terminal(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "cluster", "simulate", str(EXAMPLES / "blog-heterogeneous.yaml"),
         "--out", str(out), "--no-plots"], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "s to go" not in done.stdout + done.stderr
    assert "\x1b[" not in done.stdout + done.stderr
    assert "stopped_at" not in json.loads((out / "summary.json").read_text())
