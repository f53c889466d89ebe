"""Review 79: any tenant's task reads another tenant's usage on the slave (its processes,
memory and CPU time, as they change) from that principal's cgroup group, whose path is
the principal's name.

Each principal's tasks are under `drfmesos/<slave-id>/~p.<principal>/` (slave.
principal_groups), in every hierarchy. The slave's parents let tasks pass, not list; a
task's own cgroup is named after its framework id (the master's, random) and its task
id, which docs/how-to/isolation.md counts on: "a task that knows another's framework id
... and task id can read its cgroup's usage counters" is all it says a task can reach.
The group above is named after nothing secret: the principal's name, which the roles,
the web UI and every quota show, and the slave's id is in each task's environment
(`DRFMESOS_SLAVE_ID`) and its own /proc/self/cgroup. Its counters are readable by all
(the cgroup files' 0444): mallory's task reads how many processes alice runs here, how
much memory they hold and how much CPU time they have used, and can follow them as they
change.

tests/test_isolation_hostile.py's test says mallory's task "learns neither the name nor
the usage of alice's" cgroup; the project's promise is that one beside you reaches
nothing of yours. A tenant relies on what her tasks do (when they run, how busy they
are) being hers: a side channel on her work is what isolation is for.

A real slave as root with task users, PID namespaces and cgroups (harness.shared_slave).
"""

from __future__ import annotations

from protocol.wire.messages import TaskState

from harness.cgroups import need_cgroups
from harness.shared_slave import ALICE, MALLORY, shared_slave

# mallory's task: alice's group's counters, by the path her own cgroup shows
LOOK = """
own=$(grep :pids: /proc/self/cgroup | cut -d: -f3)
alice=/sys/fs/cgroup/pids${own%/~p.mallory/*}/~p.alice
echo "pids $(cat $alice/pids.current)"
echo "memory $(cat /sys/fs/cgroup/memory${alice#/sys/fs/cgroup/pids}/memory.usage_in_bytes)"
echo "cpu $(cat /sys/fs/cgroup/cpuacct${alice#/sys/fs/cgroup/pids}/cpuacct.usage)"
true
"""


async def test_a_tenants_task_reads_no_usage_of_another_principals_group() -> None:
    need_cgroups()
    async with shared_slave(isolation="cgroups") as s:
        await s.master.run("alice", ALICE, "a1", "exec sleep 300")
        await s.master.reaches(ALICE, "a1", TaskState.RUNNING)
        await s.master.run("mallory", MALLORY, "m1", LOOK)
        await s.master.ends(MALLORY, "m1")
        sandbox = s.sandbox(MALLORY, "m1")
        seen = "".join((sandbox / name).read_text() for name in ("stdout", "stderr"))
    read = {
        parts[0]: parts[1]
        for parts in (line.split() for line in seen.splitlines())
        if len(parts) == 2 and parts[1].isdigit()
    }
    assert not read, f"mallory's task read alice's usage here from ~p.alice: {read} ({seen!r})"
