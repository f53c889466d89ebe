"""Review 59: a tenant's task takes the host's whole PID space, and no other tenant's task
can start on the slave (nor anything the slave itself forks). With the defaults (root,
users switched, PID namespaces, cgroups) nothing bounds a task's processes and threads
(`--max-task-pids` is off unless the operator sets it); its memory limit does not bound
them either: a thread costs some 40 KB charged to its cgroup (5,000 Python threads peaked
at 205 MB), so a task of 1.3 GB holds the 32,768 pids of this host's `pid_max`.

The test does not exhaust this machine's PID space: the rig (a real slave, as root, with
alice's and mallory's tasks) runs in a PID namespace of its own whose `pid_max` is 1,500
(Linux 6.14+ keeps one per namespace), so that mallory's task of 1 GB (of the slave's 2)
reaches that bound, not the host's. alice's task is then launched: it should run.
"""

from __future__ import annotations

import json
import os

import pytest

from harness.helpers import eventually
from harness.pid_rig import scenario_in_pid_namespace

pytestmark = pytest.mark.timeout(120)
PID_MAX = 1500  # the rig's namespace's: its own pids, the slave's and the tasks'

THREADS = r"""
import sys, threading, time
threading.stack_size(32768)
never = threading.Event()
n = 0
try:
    while n < 100_000:
        threading.Thread(target=never.wait, daemon=True).start()
        n += 1
except RuntimeError as e:
    print("stopped", n, e, flush=True)
time.sleep(300)
"""


async def scenario() -> dict[str, object]:
    """In the rig's namespace: mallory's task takes every pid it can, then alice's task is
    launched."""
    from protocol.wire.messages import TaskState
    from protocol.wire.resources import Resources

    from harness.shared_slave import ALICE, MALLORY, shared_slave

    async with shared_slave(
        isolation="cgroups",
        base_in="/var/tmp",
        resources=Resources(cpus=4, mem=2048),
        **json.loads(os.environ.get("REVIEW59_SLAVE", "{}")),
    ) as s:
        program = s.work.parent / "threads.py"
        program.write_text(THREADS)
        os.chmod(program, 0o644)
        run = s.master.run  # (tasks of 0.1 cpus and 64 MB: mallory's asks for 1 GB)

        async def run_big() -> None:
            from protocol.wire.messages import CommandInfo, RunTasks, TaskInfo
            from protocol.wire.topics import Topics

            task = TaskInfo(
                task_id="m1",
                slave_id=s.master.slave_id,
                resources=Resources(cpus=1, mem=1024),
                command=CommandInfo(value=f"/usr/bin/python3 {program}"),
            )
            launch = RunTasks(framework_id=MALLORY, tasks=[task], principal="mallory")
            topics = Topics(s.slave.config.cluster)
            await s.master.bus.publish(topics.slave("slave", s.master.slave_id), launch)

        await run_big()
        await s.master.reaches(MALLORY, "m1", TaskState.RUNNING)
        stdout = s.sandbox(MALLORY, "m1") / "stdout"
        await eventually(lambda: "stopped" in stdout.read_text(), timeout=60)
        held = stdout.read_text().split()[1]
        await run("alice", ALICE, "a1", "echo hello")
        try:
            ended = await s.master.ends(ALICE, "a1", timeout=20)
            alice = {"state": ended.state.name, "message": ended.message}
        except TimeoutError:
            alice = {"state": "none in 20 s", "message": ""}
        out = s.sandbox(ALICE, "a1") / "stdout"
        alice["stdout"] = out.read_text() if out.exists() else ""
        return {"mallory_threads": int(held), "alice": alice}


async def test_a_tenants_task_cannot_take_the_pid_space_from_the_others() -> None:
    result = await scenario_in_pid_namespace("test_review59_pid_space", PID_MAX, 100)
    alice = result["alice"]
    assert (alice["state"], alice["stdout"]) == ("FINISHED", "hello\n"), (
        f"mallory's one task (1 GB of the slave's 2) held {result['mallory_threads']} "
        f"threads, every pid of the {PID_MAX} there are; alice's `echo hello` then ended "
        f"{alice['state']} ({alice['message']!r})"
    )
