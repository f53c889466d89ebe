"""Review 63 (on 2060393): a launch the master refuses is now remembered as ended
(`Accepts.refuse_launch`, so that reconciling it answers TASK_DROPPED), and it is
remembered with its whole message: up to 4,096 characters of refusal a task, which the
tenant writes (every problem of every offer id its Accept named).

One Accept of 1,000 tasks naming 1,000 offer ids the framework does not hold (charged 11
calls by its rate limit; no offer, no slave, no resources needed) has the master keep
1,000 statuses of some 5 KB each in the framework's `completed`: 5 MB a framework, 1 GB
for the 200 frameworks one principal may register (`--max-frameworks-per-principal`),
for as long as they are registered. Reconciling 1,000 tasks the master does not know
keeps as many statuses, at about a fifth of that: the message is what costs.

In process, on the memory transport."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from protocol.wire.messages import (
    Accept,
    CommandInfo,
    Filters,
    Reconcile,
    ReconcileTask,
    TaskInfo,
)
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.master import Cluster
from harness.master import cluster as cluster

pytestmark = pytest.mark.timeout(60)
TASKS = 1000


def size(o: object, seen: set[int] | None = None) -> int:
    """Bytes `o` holds, what it refers to included (each object once)."""
    seen = set() if seen is None else seen
    if id(o) in seen:
        return 0
    seen.add(id(o))
    n = sys.getsizeof(o)
    if isinstance(o, dict):
        n += sum(size(k, seen) + size(v, seen) for k, v in o.items())
    elif isinstance(o, list | tuple | set):
        n += sum(size(i, seen) for i in o)
    elif hasattr(o, "__dict__"):
        n += size(vars(o), seen)
    return n


def task(i: int) -> TaskInfo:
    return TaskInfo(
        task_id=f"t{i:04d}",
        name="n",
        slave_id="s1",
        resources=Resources(cpus=0.1),
        command=CommandInfo(value="true"),
    )


async def test_a_refused_launch_is_not_kept_with_kilobytes_of_the_tenants_text(
    cluster: Cluster,
) -> None:
    await cluster.slave("s1", Resources(cpus=4, mem=4096))
    books = cluster.master.books
    # the measure: 1,000 tasks of these ids that the master answers unknown, kept as ended
    r = await cluster.framework("R", role="r")
    reconciled: Any = books.frameworks[r.framework_id].completed
    asked = [ReconcileTask(task_id=f"t{i:04d}", slave_id="s1") for i in range(TASKS)]
    await r.bus.publish(r.to_master, Reconcile(framework_id=r.framework_id, tasks=asked))
    await eventually(lambda: len(reconciled) >= TASKS, timeout=30)
    # the attack
    m = await cluster.framework("M", role="m")
    refused: Any = books.frameworks[m.framework_id].completed
    bogus = [f"x{i:03d}" + "o" * 190 for i in range(TASKS)]
    tasks = [task(i) for i in range(TASKS)]
    await m.bus.publish(
        m.to_master,
        Accept(framework_id=m.framework_id, offer_ids=bogus, tasks=tasks, filters=Filters()),
    )
    await eventually(lambda: len(refused) >= TASKS, timeout=30)
    kept, measure = size(refused), size(reconciled)
    assert kept <= 2 * measure, (
        f"one Accept of {TASKS} tasks naming {TASKS} offer ids it does not hold (charged "
        f"{1 + TASKS // 100} calls) has the master keep {kept / 1e6:.1f} MB of statuses "
        f"({kept // TASKS} bytes a refused task, each message "
        f"{len(next(iter(refused.values())).message)} characters of the tenant's offer "
        f"ids), {kept / measure:.1f}x the {measure / 1e6:.2f} MB {TASKS} reconciled "
        f"unknown tasks keep; x200 frameworks a principal: {200 * kept / 1e9:.1f} GB"
    )
