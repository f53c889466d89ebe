"""attack87: a task group's executor's resources are checked as a custom executor's are.

A custom executor's task may not name a persistent volume (`task_problem`: it would not
see it), and no task may take part of one (`partial_volume`: a volume is one directory,
used whole). A group's executor was held to neither: a group whose executor asked for 1
MB of a 512 MB volume was launched, its executor holding a slice of the volume that no
task of it sees, and the rest (511) offered again as if it were the volume, to be taken
"whole" by the next task, or destroyed while the executor's slice stays booked. In
process, as tests/test_volumes.py (a doctored SDK sends the group: the SDK's own check
is the master's, `OfferRoom.executor_problem`)."""

from __future__ import annotations

from protocol.wire.messages import Accept, Filters, Reason, TaskGroup, TaskState
from protocol.wire.resources import Resources

from harness.master import Cluster
from harness.master import cluster as cluster

R = Resources.parse
VOLUME = "disk(team,alice)[db-1:data]"


async def test_a_groups_executor_takes_no_part_of_a_persistent_volume(cluster: Cluster) -> None:
    slave = await cluster.slave("s1", R(f"cpus:4;mem:1024;{VOLUME}:512"))
    a = await cluster.framework("A", role="team")
    offer = await a.next_offer()
    group = TaskGroup(
        executor_id="pod",
        executor_resources=R(f"cpus:0.1;mem:32;{VOLUME}:1"),
        tasks=[a.task(offer, R("cpus:1;mem:32"), "t1")],
    )
    await a.bus.publish(
        a.to_master,
        Accept(
            framework_id=a.framework_id,
            offer_ids=[offer.offer_id],
            groups=[group],
            filters=Filters(refuse_seconds=0),
        ),
    )
    error = await a.update_for("t1", TaskState.ERROR)
    assert error.reason == Reason.TASK_GROUP_INVALID
    assert "persistent volume" in error.message
    assert not slave.runs()
    offer = await a.next_offer(after=1)  # the volume back whole, nothing of it held
    assert offer.resources.get(VOLUME) == 512
