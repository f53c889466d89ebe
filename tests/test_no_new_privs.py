"""A tenant's task gains no privileges by exec (the kernel's no_new_privs): a setuid-root
program runs with the task's own uid, not root's, so a local root hole in one (pkexec's
CVE-2021-4034, sudo's Baron Samedit) is not the tenant's way to every other tenant on the
slave. Nor does its COMMAND health check gain any. `--setuid-programs` lets them, as a
Mesos agent does."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

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
from harness.shared_slave import ALICE, Shared, T, shared_slave


def setuid_id(s: Shared) -> Path:
    """A copy of `id`, setuid root, where the task's user may run it."""
    bin_dir = s.work.parent / "bin"
    bin_dir.mkdir(mode=0o755)
    program = bin_dir / "id"
    shutil.copy(shutil.which("id") or "/usr/bin/id", program)
    os.chown(program, 0, 0)
    os.chmod(program, 0o4755)
    return program


async def euid_of_setuid_program(s: Shared) -> tuple[str, str]:
    """(The effective uid a setuid-root program got in alice's task, the task's uid.)"""
    program = setuid_id(s)
    await s.master.run("alice", ALICE, "a1", f"{program} -u; id -u")
    await s.master.ends(ALICE, "a1")
    got, own = s.output(ALICE, "a1").split()
    return got, own


async def test_a_setuid_program_runs_with_the_tasks_own_uid() -> None:
    async with shared_slave() as s:
        got, own = await euid_of_setuid_program(s)
        assert own != "0"
        assert got == own


async def test_setuid_programs_work_where_the_operator_lets_them() -> None:
    """The control: the same program raises the task to root on a slave started with
    --setuid-programs (so the test above would see root, were no_new_privs not set)."""
    async with shared_slave(setuid_programs=True) as s:
        got, own = await euid_of_setuid_program(s)
        assert own != "0"
        assert got == "0"


async def test_a_tasks_command_check_gains_no_privileges_either() -> None:
    check = HealthCheck(
        type=HealthCheckType.COMMAND,
        command=CommandCheck(value="grep NoNewPrivs /proc/self/status > check-nnp"),
        delay_seconds=0,
        interval_seconds=1,
        timeout_seconds=5,
        grace_period_seconds=60,
        consecutive_failures=1000,
    )
    async with shared_slave() as s:
        task = TaskInfo(
            task_id="svc",
            slave_id=s.master.slave_id,
            resources=Resources(cpus=0.1, mem=64),
            command=CommandInfo(value="grep NoNewPrivs /proc/self/status; exec sleep 300"),
            health_check=check,
        )
        await s.master.bus.publish(
            T.slave("slave", s.master.slave_id),
            RunTasks(framework_id=ALICE, tasks=[task], principal="alice"),
        )
        await s.master.reaches(ALICE, "svc", TaskState.RUNNING)
        checked = s.sandbox(ALICE, "svc") / "check-nnp"
        await eventually(lambda: checked.exists() and checked.read_text().strip() != "")
        assert checked.read_text().split() == ["NoNewPrivs:", "1"]
        assert s.output(ALICE, "svc").split() == ["NoNewPrivs:", "1"]
        await s.master.bus.publish(
            T.slave("slave", s.master.slave_id), KillTask(framework_id=ALICE, task_id="svc")
        )
        await s.master.ends(ALICE, "svc")
