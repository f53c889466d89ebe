"""A tenant's COMMAND health check on a root slave that switches users, with PID
namespaces and cgroups (the defaults): the check runs as the task's user, never root
(docs/how-to/long-running.md), so nothing the tenant controls may run as root on its way
there -- not even a program the tenant put where the check's root steps look for one.

The slave starts the check as root with `nsenter --target INIT --pid --mount --ipc` into
the namespaces of its task's first process, and runs `/bin/sh` and `setpriv` there before
it drops to the task's user. That first process is the task's own wrapper shell, running
as the task's user: the task may ptrace it (same user, no Yama) and have it make a user
and mount namespace of its own, where it binds a directory of the tenant's over
/usr/bin. The check's root steps then run the tenant's `/bin/sh` as root."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from protocol.wire.messages import (
    CommandCheck,
    CommandInfo,
    HealthCheck,
    HealthCheckType,
    KillTask,
    RunTasks,
    TaskInfo,
    TaskState,
)
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.shared_slave import ALICE, T, shared_slave

# The task, as its user, in its own PID namespace (its wrapper shell is pid 1): a `sh`
# that records who runs it (shell builtins only: /usr/bin is the tenant's directory where
# it runs) and goes on as the real one, then pid 1 made to move into a user and mount
# namespace of its own with that directory bound over /usr/bin (/bin is a link to it).
ATTACK = r"""
S=$PWD
mkdir evil
cp "$(readlink -f /bin/sh)" real-sh
W='while read l; do case $l in Uid*) echo $l;; esac; done'
{ echo "#!$S/real-sh"; echo "$W </proc/self/status >$S/ran-as"
  echo "exec $S/real-sh \"\$@\""; } > evil/sh
chmod 755 evil/sh real-sh
gdb -p 1 -batch -ex 'call (int)unshare(0x10020000)' \
    -ex "call (int)mount(\"$S/evil\", \"/usr/bin\", 0, 4096, 0)" > gdb.out 2>&1
touch injected
sleep 300
"""


async def test_a_tasks_command_check_never_runs_a_program_of_the_tenants_as_root() -> None:
    if shutil.which("gdb") is None:
        pytest.skip("no gdb to stand in for the tenant's own ptrace")
    check = HealthCheck(
        type=HealthCheckType.COMMAND,
        command=CommandCheck(value="test -f injected && echo checked >> checks"),
        delay_seconds=0,
        interval_seconds=1,
        timeout_seconds=5,
        grace_period_seconds=60,
        consecutive_failures=1000,
    )
    async with shared_slave(base_in="/var/lib") as s:
        task = TaskInfo(
            task_id="svc",
            slave_id=s.master.slave_id,
            resources=Resources(cpus=0.1, mem=128),
            command=CommandInfo(value=ATTACK),
            health_check=check,
        )
        launch = RunTasks(framework_id=ALICE, tasks=[task], principal="alice")
        await s.master.bus.publish(T.slave("slave", s.master.slave_id), launch)
        await s.master.reaches(ALICE, "svc", TaskState.RUNNING)
        sandbox: Path = s.sandbox(ALICE, "svc")
        await eventually(lambda: (sandbox / "injected").exists(), timeout=30)
        # checks after it: either the tenant's `sh` ran (and says as whom), or checks ran
        # as they should, as the task's user, and found the file (two: one that entered
        # its namespaces before the move may have found it too)
        checks = sandbox / "checks"
        await eventually(
            lambda: (
                (sandbox / "ran-as").exists()
                or (checks.exists() and len(checks.read_text().split()) >= 2)
            ),
            timeout=30,
        )
        ran_as = (sandbox / "ran-as").read_text().split() if (sandbox / "ran-as").exists() else []
        await s.master.bus.publish(
            T.slave("slave", s.master.slave_id), KillTask(framework_id=ALICE, task_id="svc")
        )
        await s.master.ends(ALICE, "svc")
        assert ran_as[1:2] != ["0"], (
            "the tenant's /bin/sh ran as root in the slave's health check "
            f"({' '.join(ran_as)}; gdb said {(sandbox / 'gdb.out').read_text()[-300:]!r})"
        )
