"""Review 84: a custom executor's task is refused a persistent volume in its own
resources (c9fb19a), but one in its executor's resources is taken from the offer and held
for as long as the executor lives, with the volume made ready nowhere (the slave mounts a
volume in a command task's sandbox only): what the executor writes where it thinks its
volume is does not last, and the volume is nobody else's meanwhile."""

from __future__ import annotations

from protocol.wire.messages import CommandInfo, ExecutorInfo, TaskState
from protocol.wire.resources import Resources

from harness.master import Cluster
from harness.master import cluster as cluster

R = Resources.parse
VOLUME = "disk(team,alice)[db-1:data]"


async def test_a_custom_executor_is_refused_a_volume_it_would_not_see(cluster: Cluster) -> None:
    slave = await cluster.slave("s1", R(f"cpus:4;mem:1024;{VOLUME}:512"))
    a = await cluster.framework("A", role="team")
    offer = await a.next_offer()
    executor = ExecutorInfo(
        executor_id="e",
        command=CommandInfo(value="exec e"),
        resources=R(f"cpus:0.1;mem:32;{VOLUME}:512"),
    )
    task = a.task(offer, R("cpus:1;mem:32"), "db").model_copy(
        update={"command": None, "executor": executor}
    )
    await a.accept(offer, [task], refuse=0)
    error = await a.update_for("db", TaskState.ERROR)
    assert "a command task's alone" in error.message
    assert not slave.runs()
