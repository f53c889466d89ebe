"""Review 60: "each task's processes and threads are bounded by default" -- unless the
host has no pids controller to bound them with, and then nothing says so.

`make_isolator` asks `detect` for cgroups with pids, but `detect` checks only cpu and
memory (v1: their hierarchies; v2: the root's controllers), and `CgroupsV1` leaves out a
controller it does not find (`CgroupsV2` one its parent cannot enable): every task then
runs with no `pids.max`, as before review 59's fix, and the slave logs no warning (as it
does for posix isolation, or for links unprotected). A host whose pids hierarchy is not
mounted (a container's, a minimal distribution's) is review 59's PID exhaustion again,
silently. The slave should warn (auto) or refuse (`--isolation cgroups`), as Mesos refuses
a pids isolator it cannot use.

A v1 root of cpu and memory only, in a directory of the test's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog

from protocol.wire.resources import Resources
from slave.cgroups import CgroupsV1
from slave.isolator import CgroupsIsolator, make_isolator
from slave.pid_shares import PidShares


def test_a_slave_without_a_pids_controller_says_its_tasks_are_unbounded(tmp_path: Path) -> None:
    for controller in ("cpu", "cpuacct", "memory"):
        (tmp_path / controller).mkdir()
        (tmp_path / controller / "cgroup.procs").write_text("")
    shares = PidShares(32_768, Resources(cpus=4, mem=2048))
    with pytest.raises(ValueError, match="no pids controller"):  # (as the operator asked)
        make_isolator("cgroups", "s1", tmp_path, pids=shares, cpus=4)
    with structlog.testing.capture_logs() as lines:
        isolator = make_isolator("auto", "s1", tmp_path, pids=shares, cpus=4)
    assert isinstance(isolator, CgroupsIsolator)
    assert isinstance(isolator.cgroups, CgroupsV1)
    bounded = "pids" in isolator.cgroups.mounts
    said = [line for line in lines if "pids" in str(line)]
    assert bounded or said, (
        f"with no pids hierarchy, tasks get no pids.max (their bound, "
        f"{shares.of(Resources(cpus=1, mem=512))} for a task of 1 cpu), and the slave "
        f"said nothing of it ({[line['event'] for line in lines]})"
    )
