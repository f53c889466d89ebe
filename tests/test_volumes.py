"""Persistent volumes in the master's books, in process: a volume is one directory, used
whole by one live task, its id one of a kind on its slave, and never destroyed under a
task (as Mesos's master keeps them; tests/test_volumes_live.py runs real slaves)."""

from __future__ import annotations

from pathlib import Path

from protocol.wire.messages import (
    Accept,
    CommandInfo,
    Error,
    ExecutorInfo,
    Filters,
    OfferOperation,
    Reason,
    TaskState,
)
from protocol.wire.resources import Resources
from slave.volumes import volume_dir

from harness.master import Cluster
from harness.master import cluster as cluster

R = Resources.parse
VOLUME = "disk(team,alice)[db-1:data]"


async def test_two_tasks_never_share_a_volume_by_taking_part_of_it(cluster: Cluster) -> None:
    slave = await cluster.slave("s1", R(f"cpus:4;mem:1024;{VOLUME}:512"))
    a = await cluster.framework("A", role="team")
    offer = await a.next_offer()
    t1 = a.task(offer, R(f"cpus:1;mem:32;{VOLUME}:1"), "t1")
    t2 = a.task(offer, R(f"cpus:1;mem:32;{VOLUME}:1"), "t2")
    await a.accept(offer, [t1, t2], refuse=0)
    for task_id in ("t1", "t2"):
        error = await a.update_for(task_id, TaskState.ERROR)
        assert error.reason == Reason.TASK_INVALID
        assert "a persistent volume is used whole" in error.message
    assert not slave.runs()
    offer = await a.next_offer(after=1)  # all of it back, the volume whole
    await a.accept(offer, [a.task(offer, R(f"cpus:1;mem:32;{VOLUME}:512"), "whole")], refuse=0)
    assert (await slave.run_task()).task.task_id == "whole"


async def test_a_custom_executors_task_is_refused_a_volume_it_would_not_see(
    cluster: Cluster,
) -> None:
    """A volume is made ready in a command task's sandbox; a custom executor's task
    would run without it and lose what it wrote there: refused, saying so, and the volume
    offered again whole."""
    slave = await cluster.slave("s1", R(f"cpus:4;mem:1024;{VOLUME}:512"))
    a = await cluster.framework("A", role="team")
    offer = await a.next_offer()
    task = a.task(offer, R(f"cpus:1;mem:32;{VOLUME}:512"), "db").model_copy(
        update={
            "command": None,
            "executor": ExecutorInfo(executor_id="e", command=CommandInfo(value="exec e")),
        }
    )
    await a.accept(offer, [task], refuse=0)
    error = await a.update_for("db", TaskState.ERROR)
    assert "a command task's alone" in error.message
    assert not slave.runs()
    offer = await a.next_offer(after=1)
    assert offer.resources.get(VOLUME) == 512


async def test_a_volume_taken_whole_is_one_tasks(cluster: Cluster) -> None:
    slave = await cluster.slave("s1", R(f"cpus:4;mem:1024;{VOLUME}:512"))
    a = await cluster.framework("A", role="team")
    offer = await a.next_offer()
    t1 = a.task(offer, R(f"cpus:1;mem:32;{VOLUME}:512"), "t1")
    t2 = a.task(offer, R(f"cpus:1;mem:32;{VOLUME}:512"), "t2")
    await a.accept(offer, [t1, t2], refuse=0)
    assert (await slave.run_task()).task.task_id == "t1"
    assert "left of the offer" in (await a.update_for("t2", TaskState.ERROR)).message


async def test_one_create_cannot_make_two_volumes_of_one_id(cluster: Cluster) -> None:
    """`[v1:a]` and `[v1:b]` would be one directory (volumes are kept by role and id):
    a DESTROY of one would remove the other under its task."""
    assert volume_dir(Path("/w"), "disk(team)[v1:a]") == volume_dir(Path("/w"), "disk(team)[v1:b]")
    slave = await cluster.slave("s1", R("cpus:4;mem:1024;disk(team):1024"))
    a = await cluster.framework("A", role="team")
    offer = await a.next_offer()
    create = OfferOperation(type="CREATE", resources=R("disk(team)[v1:a]:10;disk(team)[v1:b]:10"))
    task = a.task(offer, R("cpus:1;mem:32;disk(team)[v1:a]:10"), "db")
    accept = Accept(
        framework_id=a.framework_id,
        offer_ids=[offer.offer_id],
        operations=[create],
        tasks=[task],
        filters=Filters(refuse_seconds=0),
    )
    await a.bus.publish(a.to_master, accept)
    refused = await a.inbox.wait_for(Error)
    assert "names a volume id twice" in refused.message
    await a.update_for("db", TaskState.ERROR)  # (its volume was not made)
    total = cluster.master.books.slaves["s1"].total
    assert not [k for k in total.millis if "[" in k]  # no volume made
    assert not slave.runs()
