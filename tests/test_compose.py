"""The docker-compose demo cluster: its files validate, and it really runs (with podman)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

DOCKER = Path(__file__).parent.parent / "docker"


def need(tool: str) -> None:
    """Outside CI a machine without the tool skips; in CI (which installs it) that fails."""
    if shutil.which(tool) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{tool} is not installed; .ci/run installs it")
        pytest.skip(f"{tool} is not installed")


def test_the_compose_file_is_valid() -> None:
    need("docker-compose")
    done = subprocess.run(
        ["docker-compose", "-f", str(DOCKER / "docker-compose.yml"), "config", "-q"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.mark.timeout(600)
@pytest.mark.slow(170)
def test_the_compose_cluster_runs_loses_a_slave_and_recovers() -> None:
    """docker/test-compose.sh: build, up, shares, kill a slave, tasks LOST and replaced."""
    for tool in ("podman", "debootstrap", "docker-compose"):
        need(tool)
    if os.geteuid() != 0:
        pytest.skip("needs root (debootstrap, podman storage)")
    # its own session: on a timeout the whole script gets SIGTERM, so that its EXIT trap
    # takes the containers down (a SIGKILL to bash alone would leave them running)
    proc = subprocess.Popen(
        ["bash", str(DOCKER / "test-compose.sh")],
        env={**os.environ, "PYTHON": sys.executable},  # its waits use this one's packages
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=540)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=50)
        pytest.fail(f"the compose test took over 540 s:\n{stdout[-4000:]}{stderr[-2000:]}")
    print(stdout[-4000:])
    assert proc.returncode == 0, stdout[-4000:] + stderr[-2000:]
    assert "PASSED" in stdout
    assert not list(Path("/tmp").glob("drfmesos-compose.*"))  # nothing left behind
