"""Review 70: a guarantee naming a resource its role's tasks do not use is never met by
the tasks a claim frees room for, so the claim takes everything it may: another tenant
loses every task the claimant declared, far past the guarantee and its own fair share.

`Preemption._plan` plans a guarantee claim while `short` says the role's guarantee still
has a gap (`quota.gap`, every resource the guarantee names), and `guarantee_rule` lets any
task outside the role go, at any share, since review 69. Role `prod` is guaranteed
`cpus:2;disk:1024` (an operator's usual guarantee: some of everything) and runs tasks of
1 CPU and 1 GB of memory, no disk: no task it places closes the disk gap, so `short`
stays true for every plan, and `plan_preemption` stops only at the claimant's declared
count (`max_tasks`). A tenant in prod declaring 8 tasks has all 8 of batch's tasks doomed
at one check, where 2 (the CPUs the guarantee names) are all a guarantee can ask.
"""

from __future__ import annotations

import pytest

from master.allocation.allocator import Allocator
from master.allocation.preemption import PreemptionConfig
from master.allocation.quota import Quota
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books, book_running, doomed

TASK = Resources(cpus=1, mem=1024)
SLAVE = Resources(cpus=4, mem=4096, disk=8192)


@pytest.mark.parametrize("policy", ["hdrf", "drf"])
def test_a_guarantee_on_a_resource_its_tasks_do_not_use_takes_no_more_than_it_can_fill(
    policy: str,
) -> None:
    config = CycleConfig(
        policy=policy, preemption=PreemptionConfig(guarantee_timeout=1.0, notice=1.0)
    )
    a, books = Allocator(policy, quota_headroom="demand"), Books()
    a.roles.set_quota("prod", Quota(guarantee=Resources(cpus=2, disk=1024)))
    for i in range(2):
        a.add_slave(f"s{i}", SLAVE)
    for fid in ("batch", "prod"):
        a.add_framework(fid, fid)
        books.roles[fid] = fid
    cycle = OfferCycle(a, books, config)
    for i in range(8):  # batch took every CPU
        slave = f"s{i // 4}"
        book_running(a, books, "batch", slave, f"t{i}", TASK, i)
    books.demand["prod"] = [(dict(TASK.millis), 8)]

    # past the guarantee's timeout
    victims = sorted(v.task_id for v in doomed(cycle, (0.0, 1.0, 2.0, 3.0)))
    assert len(victims) <= 2, (
        f"prod, guaranteed cpus:2;disk:1024 and running tasks of no disk, had "
        f"{len(victims)} of batch's 8 tasks doomed ({victims}): batch keeps "
        f"{8 - len(victims)} against its fair share of 4"
    )
