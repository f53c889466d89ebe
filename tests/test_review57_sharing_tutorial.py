"""Review 57, as a newcomer: docs/tutorials/sharing.md, run as written, does not show what
it says. After "Run a framework for each team" it says: "Both frameworks want the whole
cluster. `batch` stops at its 2-cpu limit; `web` has the rest." On this machine the two
never hold the slave's 4 CPUs: the drf-demo framework launches one task an offer and, as
Mesos frameworks do, refuses what the offer had left for 5 s (`Filters` default,
`DemoConfig.refuse_seconds`) while its 2-4 s tasks end sooner, so 1-3 CPUs sit free.
Measured here: batch (weight 1) climbs to 2 CPUs over some 25 s while web (weight 2,
promised twice batch's share) holds 0-1 CPU -- a framework offered the whole slave refuses
all of its remainder, one whose offers its limit cuts refuses less. (Nor would batch
stop at its limit were the cluster full: weights 2:1 give it a third of 4 CPUs, 1.33,
under its 2 -- with `--tasks-per-offer fill` the two hold 2.5 and 1.5.) tests/test_docs.py
runs the page but checks only the refused registration.

The page's blocks up to and with the teams' frameworks are run as tests/test_docs.py runs
them (a fresh directory, the page's ports made free ones); then the operator's
`drfmesos state --json` is asked, for 30 s at most, until what the page's words hold in
any reading: the frameworks hold all 4 CPUs between them, batch no more than its limit,
web (weight 2) no less than batch (weight 1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_docs import DOCS, NOT_RUN, PORTS, ROOT, blocks, checkout_in, end_group

from protocol.tooling.ports import free_port

PAGE = DOCS / "tutorials" / "sharing.md"
WATCHED = 30.0  # seconds: "after a few seconds, look at the cluster"


def script_until_the_teams(workdir: Path, ports: dict[str, str]) -> str:
    """The page's files written, and its shell blocks up to the one that starts the teams'
    frameworks, as one script that then waits on what it started."""
    swap = lambda text: PORTS.sub(lambda m: ports[m.group(1)], text)  # noqa: E731
    lines = ["set -eo pipefail"]
    for language, title, text in blocks(PAGE):
        if title and title.startswith(NOT_RUN):
            continue
        if title:
            (workdir / title).write_text(swap(text))
        elif language in ("sh", "bash"):
            lines += swap(text).splitlines()
            if "for team in web batch" in text:
                break
    else:
        raise AssertionError("sharing.md no longer starts a framework for each team")
    lines += ['echo "$B" > broker-address', "wait"]
    return "\n".join(lines) + "\n"


def as_said(batch: float, web: float) -> bool:
    """The whole slave held ("both want the whole cluster"), web at least batch."""
    return batch + web >= 4.0 and web >= batch


def cpus(state: dict[str, Any], name: str) -> float:
    for fw in state["frameworks"]:
        if fw["name"] == name:
            return float((fw.get("allocated") or {}).get("cpus", 0.0))
    return 0.0


@pytest.mark.slow(45)
@pytest.mark.timeout(180)
def test_the_sharing_tutorials_teams_hold_the_cluster_as_it_says(tmp_path: Path) -> None:
    checkout_in(tmp_path)
    ports = {port: str(free_port()) for port in ("1883", "8883", "5050")}
    script = script_until_the_teams(tmp_path, ports)
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    log = tmp_path / "tutorial.out"
    seen: list[tuple[float, float]] = []  # (batch, web) CPUs, each time asked
    with log.open("w") as sink:
        proc = subprocess.Popen(
            ["bash", "-c", script], cwd=tmp_path, env=env, start_new_session=True,
            stdout=sink, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            address = tmp_path / "broker-address"
            began = time.monotonic()
            while not address.exists():
                assert proc.poll() is None, log.read_text()[-4000:]
                assert time.monotonic() - began < 60, log.read_text()[-4000:]
                time.sleep(0.1)  # (polling for the file the script writes)
            broker = address.read_text().strip()
            ops = ["--broker", f"mqtts://ops@{broker}", "--secret-file", "auth/secrets/ops",
                   "--ca", "auth/ca.pem"]  # fmt: skip
            began = time.monotonic()
            while time.monotonic() - began < WATCHED:
                asked = subprocess.run(
                    ["drfmesos", "state", *ops, "--json"], cwd=tmp_path, env=env,
                    capture_output=True, text=True, timeout=30,
                )  # fmt: skip
                if asked.returncode == 0:
                    state = json.loads(asked.stdout)
                    seen.append((cpus(state, "batch"), cpus(state, "web")))
                    if as_said(*seen[-1]):
                        break
        finally:
            end_group(proc)
    assert seen, log.read_text()[-4000:]
    assert all(batch <= 2.0 for batch, _ in seen), seen  # (its limit holds)
    assert any(as_said(batch, web) for batch, web in seen), (
        f"in {WATCHED:g} s the teams never held the slave's 4 CPUs between them with web "
        f"(weight 2) holding at least batch's (weight 1): (batch, web) CPUs as the "
        f"operator saw them: {seen}"
    )
