"""The retained state snapshot on a small cluster with many tasks (review 54).

The snapshot (`<cluster>/state`, retained: `drfmesos state`, the plots, a standby's web
UI) lists every live task and offer of a cluster of fewer than 200 slaves, and counts
them past it; the text of task names and messages it lists is bounded (LISTED_TEXT), but
not the tasks themselves. A tenant running some 25,000 small tasks (0.01 of a cpu each,
with ids of the 200 characters an id may have) on one slave makes a snapshot past the
broker's packet limit: the bus refuses to publish it (`bus.unpublishable`), every tick,
and the operators' tools read a stale state for as long as the tasks run. A snapshot must
stay publishable whatever the tasks (counted past what fits, as slaves are)."""

from __future__ import annotations

from typing import Any

from protocol.transport.sending import MAX_PAYLOAD
from protocol.wire.codec import encode
from protocol.wire.messages import RunTasks, State
from protocol.wire.resources import Resources

from harness.fakes import FakeSlave
from harness.master import Cluster
from harness.master import cluster as cluster

TASKS, PER_ACCEPT = 25_000, 1_000
SMALL = Resources(cpus=0.01, mem=1)


async def launched(slave: FakeSlave, count: int) -> None:
    """Until the master has sent `slave` `count` tasks to run."""
    runs = slave.inbox.of
    await slave.inbox.wait_until(lambda: sum(len(r.tasks) for r in runs(RunTasks)) >= count, 30)


async def test_a_tenants_many_small_tasks_leave_the_state_snapshot_publishable(
    cluster: Cluster,
) -> None:
    a = await cluster.framework("A")
    s1 = await cluster.slave("s1", Resources(cpus=TASKS * 0.01 + 1, mem=TASKS + 1024))
    for n in range(TASKS // PER_ACCEPT):
        offer = await a.next_offer(after=n)
        tasks = [
            a.task(offer, SMALL, f"{n:03d}-{i:04d}-".ljust(200, "x")) for i in range(PER_ACCEPT)
        ]
        await a.accept(offer, tasks, refuse=0)
        await launched(s1, (n + 1) * PER_ACCEPT)
    assert len(cluster.master.books.frameworks[a.framework_id].tasks) == TASKS
    posted: list[State] = []
    post = cluster.master.bus.post

    def spy(topic: str, message: Any, **kw: Any) -> None:
        if isinstance(message, State):
            posted.append(message)
        post(topic, message, **kw)

    cluster.master.bus.post = spy  # type: ignore[method-assign]
    cluster.master.publish_state()
    assert posted
    size = len(encode(posted[-1], None, 0))
    assert size <= MAX_PAYLOAD, f"the snapshot is {size:,} bytes: the broker takes {MAX_PAYLOAD:,}"
