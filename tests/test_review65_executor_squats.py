"""Review 65 (on 58f0bdb): any tenant squats any port of the slave's range through a
custom executor.

Review 64's fix took a custom executor's processes out of the ports isolator whole
(`executor_groups`: "an executor's processes are its own, never strays: not looked at").
An executor is a tenant's own code, which any framework may name in its TaskInfo; what
it and its children listen on is now held to nothing. Mesos's `network/ports` isolator
holds an executor's container to the ports of its tasks (and its own resources), as it
holds a command task's.

On review 63's slave (`--switch-user --no-pid-namespace`, ports held, a pass every
0.2 s; the shared slave rig), mallory's task `web-1` is given B+4, and its executor
serves on B+6, a port no task of hers was given (the next tenant's). Two of alice's
squatters (a command task on B+7, given B+5) are caught one after the other, which shows
two whole passes; then 3 s more (15 passes). Seen: mallory's executor still answers on
B+6, and her task is RUNNING.

Expected: a custom executor's processes that listen on a port of the slave's range that
none of its tasks (nor its own resources) was given are killed as a command task's are,
and the executor's tasks failed (CONTAINER_LIMITATION); review 64's executor serving its
task's port serves on."""

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


async def test_a_custom_executor_squatting_a_port_none_of_its_tasks_was_given_is_stopped() -> None:
    base = free_port(10)
    held = Discrete({PORTS: Ranges([(base, base + 9)])})
    async with shared_slave(discrete=held, ports_check_interval=0.2, pid_namespace=False) as s:
        sid = s.slave.slave_id
        squatter = ExecutorInfo(  # (an executor that serves a port not its task's)
            executor_id="web",
            command=CommandInfo(value=f"exec {http_server(base + 6)}"),
            resources=Resources(cpus=0.1, mem=64),
        )
        web = TaskInfo(
            task_id="web-1",
            slave_id=sid,
            resources=Resources(cpus=0.1, mem=64),
            executor=squatter,
            data=b"",
            discrete=ports(base + 4),
        )
        await s.master.launch("mallory", MALLORY, web)
        await eventually(lambda: answers(base + 6), timeout=20)  # (its server is up)
        # two whole passes of the isolator: each catches one squatter of alice's
        for i in range(2):
            squat = f"exec {http_server(base + 7)}"
            await s.master.launch(
                "alice", ALICE, command(f"squat-{i}", squat, ports(base + 5), sid)
            )
            end = await s.master.ends(ALICE, f"squat-{i}")
            assert end.state == TaskState.FAILED, end
        try:
            await eventually(lambda: not answers(base + 6), timeout=3)
        except AssertionError:
            raise AssertionError(
                f"mallory's executor (its task given {base + 4}) serves on {base + 6}, "
                "given to none of her tasks, after two whole passes and 15 more; her task "
                f"is {s.master.states(MALLORY, 'web-1')}"
            ) from None
