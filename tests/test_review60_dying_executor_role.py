"""Review 60: a torn-down multi-role framework's executors are charged to its first role,
not to the role they were allocated in, while they die (master.removals: `on[fw.all_roles()
[0]]`, where the master knows each executor's role: `Framework.executor_roles`).

M subscribes in roles [shared, m] (`shared` a role it shares with another team, first in
its list) and runs, in role m, a task of 1 cpu with an executor of 1 cpu. Torn down, its
task and executor run on in their grace: the task's cpu is charged to m, the executor's to
`shared`. So a tenant moves part of its dying charge onto a role others are in (and off
its own: its next framework in m is first again for that room).

In process, on the memory transport; the slave's tasks in their grace (not ended)."""

from __future__ import annotations

import functools

import pytest

from protocol.wire.messages import Offers, ShutdownFramework, Teardown
from protocol.wire.resources import Resources
from protocol.wire.values import CommandInfo, ExecutorInfo, FrameworkCapability

from harness.fakes import FakeFramework
from harness.helpers import eventually
from harness.master import Cluster
from harness.master import cluster as cluster

pytestmark = pytest.mark.timeout(60)
GB = 1024
CPU = Resources(cpus=1, mem=GB)


def more_than(fw: FakeFramework, n: int) -> bool:
    return fw.offer_count() > n


async def test_a_dying_executor_is_charged_to_the_role_it_was_allocated_in(
    cluster: Cluster,
) -> None:
    master = cluster.master
    fw = await cluster.framework(
        "M", roles=["shared", "m"], capabilities=[FrameworkCapability.MULTI_ROLE]
    )
    s1 = await cluster.slave("s1", Resources(cpus=4, mem=4 * GB))
    s1.ends_shut_down_frameworks = False  # (its tasks in their grace: not ended)
    await eventually(lambda: fw.offer_count() >= 1)
    seen = [o for batch in fw.inbox.of(Offers) for o in batch.offers]
    while not any(o.role == "m" for o in seen):  # (the other role's declined for good)
        for offer in seen:
            await fw.decline(offer, refuse=1000)
        await eventually(functools.partial(more_than, fw, fw.offer_count()))
        seen = [o for batch in fw.inbox.of(Offers) for o in batch.offers if o.role == "m"]
    offer = next(o for o in seen if o.role == "m")
    executor = ExecutorInfo(executor_id="e1", command=CommandInfo(value="executor"), resources=CPU)
    task = fw.task(offer, CPU, "t1").model_copy(update={"executor": executor, "command": None})
    await fw.accept(offer, [task], refuse=1000)
    await s1.run_task()
    a = master.allocator
    await eventually(lambda: a.allocation(fw.framework_id, "m") == CPU + CPU)

    shutdowns = len(s1.inbox.of(ShutdownFramework))
    await fw.bus.publish(fw.to_master, Teardown(framework_id=fw.framework_id))
    await s1.inbox.wait_count(ShutdownFramework, shutdowns + 1)
    held = {role: Resources.from_millis(a.roles.held(role)) for role in ("m", "shared")}
    assert held == {"m": CPU + CPU, "shared": Resources()}, (
        f"M's dying task and executor, both allocated in role m, are charged {held}: the "
        f"executor's cpu moved to `shared`, its first role"
    )
