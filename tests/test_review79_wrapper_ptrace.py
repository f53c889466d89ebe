"""Review 79: a running task escapes its cgroup (its pids bound, its memory limit, its CPU
weight) by ptracing its own wrapper, which the slave keeps out of the cgroup.

On cgroup v1 the task's shell joins its cgroup itself; the wrapper around it, pid 1 of
the task's PID namespace, runs as the task's user and stays out (slave.confine: "the
wrapper stays out, so the exit status it writes is not charged to the task";
docs/how-to/isolation.md says the same). Review 60 closed one way to have the wrapper run
the task's program (its `sleep` from the task's PATH), by giving the wrapper /bin/sleep.
The wrapper is still the task's user's process, and this host has no Yama: any process
of that user may ptrace it (tests/test_health_check_root.py does it with gdb to pid 1).
mallory's task has gdb make pid 1 call `system()`: what that starts is in pid 1's
cgroups, the slave's, not her task's. Her task, bounded at 16 pids (`--max-task-pids
16`), ran 53 processes (48 of them pid 1's, in the host's root pids cgroup: outside its
principal's bound and the slave's 3/4 of the host's too; in memory, charged to the
slave's own cgroup); the same way past its memory limit and CPU weight. A custom
executor's first shell (pid 1 of its namespace, slave.confine.EXECUTOR_IN_NAMESPACE)
stays out of the executor's cgroup the same way.

The docs promise "Each task's processes and threads are bounded, so that no tenant's task
can take every pid of the host" and that "its cgroup holds it to its resources". A
tenant beside mallory relies on it: her processes (and memory) past her bound are the
host's pids (memory) that alice's tasks no longer get.

A real slave as root with task users, PID namespaces and cgroups (harness.shared_slave);
skipped without gdb (the tenant's ptrace, as in test_health_check_root).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from protocol.wire.messages import CommandInfo, KillTask, RunTasks, TaskInfo, TaskState
from protocol.wire.resources import Resources
from slave.isolator import container_name

from harness.helpers import eventually
from harness.shared_slave import MALLORY, T, shared_slave

pytestmark = pytest.mark.timeout(90)
BOUND = 16  # --max-task-pids
FORKS = 48

# what pid 1 (her wrapper, once outside her cgroup) is made to run: its pids and memory
# cgroups, then FORKS sleeps (within her bound, the shell gives up at the first fork
# refused), then what its /proc (the task's own PID namespace) counts
ESCAPE = f"""grep -E 'pids|memory' /proc/self/cgroup | tr '\\n' ' ' > escaped.cgroup
i=0; while [ "$i" -lt {FORKS} ]; do /bin/sleep 120 & i=$((i+1)); done
n=0; for p in /proc/[0-9]*; do n=$((n+1)); done
echo "$n" > escaped.tmp && mv escaped.tmp escaped
"""
COMMAND = f"""cat > escape.sh <<'EOF'
{ESCAPE}EOF
S=$PWD
gdb -p 1 -batch -ex "call (int)system(\\"cd $S && /bin/sh escape.sh\\")" > gdb.out 2>&1
echo ready
exec /bin/sleep 120
"""


async def test_a_task_cannot_escape_its_cgroup_through_its_wrapper() -> None:
    if shutil.which("gdb") is None:
        pytest.skip("no gdb to stand in for the tenant's own ptrace")
    async with shared_slave(isolation="cgroups", base_in="/var/lib", max_task_pids=BOUND) as s:
        sandbox: Path = s.sandbox(MALLORY, "m1")
        task = TaskInfo(
            task_id="m1",
            slave_id=s.master.slave_id,
            resources=Resources(cpus=0.1, mem=256),
            command=CommandInfo(value=COMMAND),
        )
        run = RunTasks(framework_id=MALLORY, tasks=[task], principal="mallory")
        await s.master.bus.publish(T.slave("slave", s.master.slave_id), run)
        await s.master.reaches(MALLORY, "m1", TaskState.RUNNING)
        await eventually(lambda: "ready" in s.output_so_far(MALLORY, "m1"), timeout=30)
        escaped, cgroups = sandbox / "escaped", sandbox / "escaped.cgroup"
        held = int(escaped.read_text()) if escaped.exists() else 0
        cgroup = cgroups.read_text().strip() if cgroups.exists() else ""
        gdb = (sandbox / "gdb.out").read_text()[-300:] if not cgroup else ""
        task_cgroup = f"/{container_name(MALLORY, 'm1')}"
        await s.master.bus.publish(
            T.slave("slave", s.master.slave_id), KillTask(framework_id=MALLORY, task_id="m1")
        )
        await s.master.ends(MALLORY, "m1")
    assert held <= BOUND, (
        f"mallory's task, bounded at {BOUND} pids, had its wrapper (pid 1, outside its "
        f"cgroup: {cgroup}) start its processes: {held} in its PID namespace"
    )
    # what pid 1 ran was in her cgroups (her bound held it), or it ran nothing: the
    # ptrace was refused
    assert not cgroup or all(line.endswith(task_cgroup) for line in cgroup.split()), cgroup
    assert cgroup or "ptrace" in gdb, gdb
