"""Review 62 (on 483aa96 and 32fcf81): a tenant takes the slave's whole pid budget with
many small tasks, well inside its fair share, and no other tenant's task can start.

Each task's `pids.max` is its dominant share of 3/8 of the host's pids, but at least
LEAST (16) however small the task is (`PidShares.of`); the slave's tasks together are
held to 3/4 of the host's (`PidShares.together`, the parent cgroup's `pids.max`), on the
ground that "the shares of the tasks a slave runs at once add up to 2 at the most". The
floor breaks that sum: a task of 0.01 cpus and 24 MB has a share of 0.003 and is given
16 pids, 30 times its share's worth. mallory runs 72 such tasks -- 0.72 of 4 cpus and
1.7 of 8 GB, a dominant share of 0.21, below alice's fair half -- each holding every
pid its bound lets it: together 1,152, past the 1,125 the parent cgroup holds. alice's
task of 1 cpu and 1 GB (its own bound 281), `/bin/true && echo hello`, is launched next:
it cannot fork. (On a host of 32,768 pids it is 1,536 tasks of 0.01 cpus: 15 cpus of a
100-cpu slave.)

The rig of tests/test_review59_pid_space.py: a real slave as root in a PID namespace of
its own whose `pid_max` is 1,500 (Linux 6.14+), so that the host's own are not touched.
"""

from __future__ import annotations

import os

import pytest

from harness.helpers import eventually
from harness.pid_rig import scenario_in_pid_namespace

pytestmark = pytest.mark.timeout(300)
PID_MAX = 1500  # the rig's namespace's: its own pids, the slave's and the tasks'
TASKS = 72  # mallory's: 72 x 16 = 1,152 > 3/4 of 1,500

THREADS = r"""
import threading, time
threading.stack_size(32768)
never = threading.Event()
n = 0
try:
    while n < 1000:
        threading.Thread(target=never.wait, daemon=True).start()
        n += 1
except RuntimeError as e:
    print("stopped", n, flush=True)
time.sleep(600)
"""


async def scenario() -> dict[str, object]:
    """In the rig's namespace: mallory's small tasks each take every pid they may, then
    alice's task is launched."""
    from protocol.wire.messages import CommandInfo, RunTasks, TaskInfo, TaskState
    from protocol.wire.resources import Resources
    from protocol.wire.topics import Topics

    from harness.shared_slave import ALICE, MALLORY, shared_slave

    async with shared_slave(
        isolation="cgroups", base_in="/var/tmp", resources=Resources(cpus=4, mem=8192)
    ) as s:
        program = s.work.parent / "threads.py"
        program.write_text(THREADS)
        os.chmod(program, 0o644)
        topics = Topics(s.slave.config.cluster)

        def task(task_id: str, resources: Resources, command: str) -> TaskInfo:
            return TaskInfo(
                task_id=task_id,
                slave_id=s.master.slave_id,
                resources=resources,
                command=CommandInfo(value=command),
            )

        small = Resources(cpus=0.01, mem=24)
        tasks = [task(f"m{i}", small, f"/usr/bin/python3 {program}") for i in range(TASKS)]
        launch = RunTasks(framework_id=MALLORY, tasks=tasks, principal="mallory")
        await s.master.bus.publish(topics.slave("slave", s.master.slave_id), launch)
        for t in tasks:
            await s.master.reaches(MALLORY, t.task_id, TaskState.RUNNING, timeout=120)

        def stopped() -> list[int]:
            held = []
            for t in tasks:
                out = s.sandbox(MALLORY, t.task_id) / "stdout"
                text = out.read_text() if out.exists() else ""
                if "stopped" in text:
                    held.append(int(text.split()[1]))
            return held

        def gave_up() -> int:
            return sum(any(x.terminal for x in s.master.states(MALLORY, t.task_id)) for t in tasks)

        # (rig, #63: each of mallory's tasks has taken every pid it could -- said how many
        # threads it holds, or ended, unable to fork once her tasks together held what her
        # share of the slave is worth)
        await eventually(lambda: len(stopped()) + gave_up() >= TASKS, timeout=60)
        threads = sum(stopped())
        alice = task("a1", Resources(cpus=1, mem=1024), "/bin/true && echo hello")
        go = RunTasks(framework_id=ALICE, tasks=[alice], principal="alice")
        await s.master.bus.publish(topics.slave("slave", s.master.slave_id), go)
        try:
            ended = await s.master.ends(ALICE, "a1", timeout=30)
            result = {"state": ended.state.name, "message": ended.message}
        except TimeoutError:
            result = {"state": "none in 30 s", "message": ""}
        out = s.sandbox(ALICE, "a1") / "stdout"
        result["stdout"] = out.read_text() if out.exists() else ""
        err = s.sandbox(ALICE, "a1") / "stderr"
        result["stderr"] = err.read_text()[-300:] if err.exists() else ""
        return {
            "mallory_threads": threads,
            "mallory_holding": len(stopped()),
            "mallory_ended": gave_up(),
            "alice": result,
        }


async def test_many_small_tasks_cannot_take_the_slaves_pids_from_the_others() -> None:
    result = await scenario_in_pid_namespace("test_review62_pid_floor", PID_MAX, 280)
    print(result)  # (the figures, with -s)
    alice = result["alice"]
    assert (alice["state"], alice["stdout"]) == ("FINISHED", "hello\n"), (
        f"mallory's {TASKS} tasks of 0.01 cpus and 24 MB (a dominant share of 0.21 of a "
        f"4-cpu 8 GB slave) held {result['mallory_threads']} threads, each its floor of "
        f"16 pids ({result['mallory_holding']} holding, {result['mallory_ended']} ended); "
        f"alice's `/bin/true && echo hello` (1 cpu, 1 GB) then "
        f"ended {alice['state']} ({alice['message']!r}, stderr {alice['stderr']!r})"
    )
