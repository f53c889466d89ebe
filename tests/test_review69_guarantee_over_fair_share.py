"""Review 69: preemption enforces a quota guarantee only up to the role's weighted fair
share, so a tenant that took the cluster keeps a guaranteed role below its guarantee for
as long as its tasks run.

A guarantee "is served first, unconditionally", and a role below it for
`--guarantee-timeout` seconds preempts (the stricter case). But a victim may lose a task
only while over its fair share, and only when the claimant's role is below its own
(`Cluster.may_lose`), and the fair shares are the policy's ideal, which knows weights and
no guarantees. Role `prod`, guaranteed 6 of the 8 CPUs, arrives where `batch` took the
idle cluster (`--quota-headroom demand`: nothing is held for a role that wants nothing).
Preemption takes batch down to its weighted half, 4, and stops: prod runs 4 of its
guaranteed 6, batch keeps 2 of them for as long as its tasks run.
"""

from __future__ import annotations

import pytest

from master.allocation.allocator import Allocator
from master.allocation.planning import RunningTask
from master.allocation.preemption import PreemptionConfig
from master.allocation.quota import Quota
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books, book_running

TASK = Resources(cpus=1, mem=1024)
SLAVE = Resources(cpus=4, mem=4096)


@pytest.mark.parametrize("policy", ["hdrf", "drf"])
def test_a_guarantee_above_the_fair_share_is_preempted_for_in_full(policy: str) -> None:
    config = CycleConfig(
        policy=policy, preemption=PreemptionConfig(guarantee_timeout=2.0, notice=1.0)
    )
    a, books = Allocator(policy, quota_headroom="demand"), Books()
    a.roles.set_quota("prod", Quota(guarantee=Resources(cpus=6)))
    for i in range(2):
        a.add_slave(f"s{i}", SLAVE)
    for name in ("batch", "prod"):
        a.add_framework(name, name)
        books.roles[name] = name
    cycle = OfferCycle(a, books, config)
    for i in range(8):  # batch took the idle cluster
        slave = f"s{i // 4}"
        book_running(a, books, "batch", slave, f"t{i}", TASK, i)
    books.demand["prod"] = [(dict(TASK.millis), 6)]  # its guarantee's worth

    victims = []
    for now in range(12):  # a check a second; each claim's victims end, and prod launches
        for claim in cycle.check(float(now)).claims:
            for plan in claim.plans:
                for v in plan.victims:
                    victims.append(v.task_id)
                    books.tasks.pop((v.framework_id, v.task_id))
                    a.recover(v.framework_id, v.slave_id, TASK)
                    cycle.task_ended(v.framework_id, v.task_id, finished=False, ran=1.0)
                a.allocate_existing("prod", plan.slave_id, TASK)
                books.tasks[("prod", f"p{len(victims)}")] = RunningTask(
                    "prod", f"p{len(victims)}", plan.slave_id, dict(TASK.millis), now
                )
                cycle.launched("prod", plan.slave_id, TASK)
                demand = books.demand["prod"][0]
                books.demand["prod"] = [(demand[0], demand[1] - 1)]
    prod = a.allocation("prod").get("cpus") or 0.0
    assert prod >= 6, (
        f"prod, guaranteed 6 of 8 CPUs, runs {prod:g} ({len(victims)} of batch's tasks "
        f"preempted); fair shares as preemption reads them: {cycle.preemption.fair}"
    )
