"""Review 64 (on 4ff0e56): the ports isolator takes a tenant's custom executor for a stray.

`_stop_strays` knows a process of no command task by its user: one listening on a port
of the slave's range that none of its user's command tasks was given is killed, and that
user's task failed where it runs one alone. But a custom executor (and what it starts
for its tasks) runs as its principal's user too, and is no command task's: the slave's
ports isolator does not look at executors (the module's docstring: "a custom executor's
processes are not looked at"), yet here its server is killed as soon as the same
principal runs a command task on the slave, and that honest command task is failed
TASK_FAILED (CONTAINER_LIMITATION) for a port its own executor's task was given.

The rig is review 63's configuration, where strays are looked for: a slave as root that
switches users without PID namespaces for tasks (`--switch-user --no-pid-namespace`,
ports held by default), cgroups. mallory's executor serves on port B+4, the port its
task was given; her command task `holder` was given B+3 and sleeps. A squatter of
alice's (a command task listening on a port it was not given) is caught twice, which
shows the isolator has made two whole passes. Seen: `holder` TASK_FAILED "a process it
left listened on port B+4 of the slave's range, not given to it (its ports: B+3)", and
the executor's server killed.
Expected: mallory's executor serves on, `holder` runs on."""

from __future__ import annotations

import pytest

from protocol.tooling.ports import free_port
from protocol.wire.discrete import Discrete, Ranges
from protocol.wire.messages import CommandInfo, ExecutorInfo, TaskInfo, TaskState
from protocol.wire.resources import PORTS, Resources

from harness.helpers import eventually
from harness.ports import answers, command, ports
from harness.shared_slave import ALICE, MALLORY, shared_slave
from harness.slave import http_server

pytestmark = pytest.mark.timeout(60)


async def test_a_custom_executor_serving_its_tasks_port_is_no_stray() -> None:
    base = free_port(10)
    held = Discrete({PORTS: Ranges([(base, base + 9)])})
    async with shared_slave(discrete=held, ports_check_interval=0.2, pid_namespace=False) as s:
        sid = s.slave.slave_id
        server = ExecutorInfo(  # (an executor that serves its task's port; never registers)
            executor_id="web",
            command=CommandInfo(value=f"exec {http_server(base + 4)}"),
            resources=Resources(cpus=0.1, mem=64),
        )
        web = TaskInfo(
            task_id="web-1",
            slave_id=sid,
            resources=Resources(cpus=0.1, mem=64),
            executor=server,
            data=b"",
            discrete=ports(base + 4),
        )
        await s.master.launch("mallory", MALLORY, web)
        await s.master.launch(
            "mallory", MALLORY, command("holder", "exec sleep 600", ports(base + 3), sid)
        )
        await s.master.reaches(MALLORY, "holder", TaskState.RUNNING)
        await eventually(lambda: answers(base + 4), timeout=20)  # (its server is up)
        # two whole passes of the isolator: each catches one squatter of alice's
        for i in range(2):
            squat = f"exec {http_server(base + 6)}"
            await s.master.launch(
                "alice", ALICE, command(f"squat-{i}", squat, ports(base + 5), sid)
            )
            end = await s.master.ends(ALICE, f"squat-{i}")
            assert end.state == TaskState.FAILED, end
        holder = s.master.states(MALLORY, "holder")
        assert not any(state.terminal for state in holder), (
            f"mallory's command task was failed for her executor's port: {holder}, "
            f"{[st.message for f, st in s.master.statuses if st.task_id == 'holder']}"
        )
        assert answers(base + 4), "mallory's executor, serving its task's port, was killed"
