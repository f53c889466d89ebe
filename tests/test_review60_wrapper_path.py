"""Review 60: a killed task's processes escape its cgroup, and so its pids bound (and its
memory limit), through the wrapper's `sleep`.

On cgroup v1 the task's shell joins its cgroup itself; the wrapper around it (pid 1 of
the task's PID namespace, the task's user) stays out (slave.confine). Killed, the wrapper
waits for the rest of the task, `sleep 0.1` at a time (confine._REST), and `sleep` is
found on the PATH the task's first shell exported: the task's own environment, which a
framework sets (CommandInfo.environment). mallory's task puts its own `sleep` first on
its PATH, leaves a child that ignores SIGTERM, and kills itself (a framework's KillTask,
5 s grace): the wrapper runs her program outside her task's cgroup, and it starts 64
processes where her task's bound (0.001 cpus) is 16. Without a PID namespace, what it
starts in a session of its own also outlives the task: it is in no cgroup the slave
kills and no process group it signals.

A real slave as root with task users, PID namespaces and cgroups (harness.shared_slave).
"""

from __future__ import annotations

import contextlib
import os
import signal

import pytest

from protocol.wire.messages import CommandInfo, KillTask, RunTasks, TaskInfo, TaskState
from protocol.wire.resources import Resources
from protocol.wire.values import KillPolicy

from harness.helpers import eventually
from harness.shared_slave import MALLORY, T, shared_slave

pytestmark = pytest.mark.timeout(120)
FORKS = 64

SLEEP = f"""#!/bin/sh
[ -e escaped ] && exec /bin/sleep "$@"
: > escaped.tmp
grep pids /proc/self/cgroup > escaped.cgroup
i=0; while [ "$i" -lt {FORKS} ]; do /bin/sleep 30 & i=$((i+1)); done
echo "$i" > escaped.tmp && mv escaped.tmp escaped
exec /bin/sleep "$@"
"""
COMMAND = f"""mkdir -p bin && cat > bin/sleep <<'EOF'
{SLEEP}EOF
chmod 755 bin/sleep
( trap '' TERM; exec /bin/sleep 300 ) &
trap 'exit 0' TERM
echo ready
wait
"""


async def test_a_killed_tasks_wrapper_runs_nothing_of_the_tasks_outside_its_cgroup() -> None:
    async with shared_slave(isolation="cgroups", base_in="/var/lib") as s:
        sandbox = s.sandbox(MALLORY, "m1")
        task = TaskInfo(
            task_id="m1",
            slave_id=s.master.slave_id,
            resources=Resources(cpus=0.001, mem=64),
            command=CommandInfo(
                value=COMMAND, environment={"PATH": f"{sandbox}/bin:/usr/bin:/bin"}
            ),
        )
        run = RunTasks(framework_id=MALLORY, tasks=[task], principal="mallory")
        await s.master.bus.publish(T.slave("slave", s.master.slave_id), run)
        await s.master.reaches(MALLORY, "m1", TaskState.RUNNING)
        await eventually(lambda: "ready" in s.output(MALLORY, "m1"), timeout=20)
        kill = KillTask(framework_id=MALLORY, task_id="m1", kill_policy=KillPolicy(grace_period=5))
        await s.master.bus.publish(T.slave("slave", s.master.slave_id), kill)
        escaped = sandbox / "escaped"
        with contextlib.suppress(AssertionError):
            await eventually(escaped.exists, timeout=5)
        held = escaped.read_text().strip() if escaped.exists() else ""
        cgroup = (sandbox / "escaped.cgroup").read_text().strip() if held else ""
        await s.master.ends(MALLORY, "m1")
    assert not held, (
        f"killed, mallory's task (0.001 cpus: 16 pids) had its wrapper run her `sleep` "
        f"from her PATH, outside its cgroup ({cgroup}), which started {held} processes"
    )


# without a PID namespace: what the wrapper runs starts a session of its own, which
# outlives the task's kill (its process group's) and its cgroup's (it is in none)
STAY = """#!/bin/sh
[ -e stays ] && exec /bin/sleep "$@"
setsid /bin/sh -c 'echo $$ > stays.tmp && mv stays.tmp stays && exec /bin/sleep 600' &
exec /bin/sleep "$@"
"""
COMMAND_STAY = COMMAND.replace(SLEEP, STAY)


def uid_of(pid: int) -> int | None:
    """The user of a live process `pid` (None: none such)."""
    try:
        return os.stat(f"/proc/{pid}").st_uid if pid > 0 else None
    except FileNotFoundError:
        return None


async def test_a_killed_tasks_program_does_not_outlive_it_without_a_pid_namespace() -> None:
    pid = 0
    try:
        async with shared_slave(isolation="cgroups", base_in="/var/lib", pid_namespace=False) as s:
            sandbox = s.sandbox(MALLORY, "m1")
            task = TaskInfo(
                task_id="m1",
                slave_id=s.master.slave_id,
                resources=Resources(cpus=0.001, mem=64),
                command=CommandInfo(
                    value=COMMAND_STAY, environment={"PATH": f"{sandbox}/bin:/usr/bin:/bin"}
                ),
            )
            run = RunTasks(framework_id=MALLORY, tasks=[task], principal="mallory")
            await s.master.bus.publish(T.slave("slave", s.master.slave_id), run)
            await s.master.reaches(MALLORY, "m1", TaskState.RUNNING)
            await eventually(lambda: "ready" in s.output(MALLORY, "m1"), timeout=20)
            kill = KillTask(
                framework_id=MALLORY, task_id="m1", kill_policy=KillPolicy(grace_period=2)
            )
            await s.master.bus.publish(T.slave("slave", s.master.slave_id), kill)
            ended = await s.master.ends(MALLORY, "m1")
            stays = sandbox / "stays"
            pid = int(stays.read_text()) if stays.exists() else 0
            owner = uid_of(pid)
            alive = owner is not None
    finally:
        if pid > 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert not alive, (
        f"mallory's task ended {ended.state.name}, and a process her wrapper started from "
        f"her PATH (pid {pid}, uid {owner}) runs on, in no cgroup of hers"
    )
