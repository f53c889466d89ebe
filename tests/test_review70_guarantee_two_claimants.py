"""Review 70: a guaranteed role with two frameworks wanting has its whole gap preempted
for once by each of them: another tenant loses twice the guarantee's worth, down to
nothing, at one check.

`Preemption._guarantee_claims` makes a claim for every wanting member of a role short of
its guarantee, and `_plan` plans each one while the role is `short`: what the role holds
but the claimant's own (`others`) is read from the contenders as they came in, never
from the books the earlier claims' plans changed (`plan_preemption` applies its plans to
`cluster.held`, which `others` does not read). So the second member plans the role's
whole gap again, as if the first had freed nothing. Role `prod`, guaranteed 4 of the 8
CPUs, has two frameworks, each declaring 4 tasks; `batch` (no guarantee, weight 1: its
fair share is half) runs 8. One check dooms all 8 of batch's tasks: prod would run 8
against its guarantee of 4, batch nothing against its fair 4. `guarantee_rule` lets any
task of batch go (it has no guarantee), so nothing else stops it.
"""

from __future__ import annotations

import pytest

from master.allocation.allocator import Allocator
from master.allocation.preemption import PreemptionConfig
from master.allocation.quota import Quota
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books, book_running

TASK = Resources(cpus=1, mem=1024)
SLAVE = Resources(cpus=4, mem=4096)
GUARANTEE = 4


@pytest.mark.parametrize("policy", ["hdrf", "drf"])
def test_a_guarantee_with_two_wanting_members_is_preempted_for_once(policy: str) -> None:
    config = CycleConfig(
        policy=policy, preemption=PreemptionConfig(guarantee_timeout=2.0, notice=1.0)
    )
    a, books = Allocator(policy, quota_headroom="demand"), Books()
    a.roles.set_quota("prod", Quota(guarantee=Resources(cpus=GUARANTEE)))
    for i in range(2):
        a.add_slave(f"s{i}", SLAVE)
    for fid, role in (("batch", "batch"), ("p1", "prod"), ("p2", "prod")):
        a.add_framework(fid, role)
        books.roles[fid] = role
    cycle = OfferCycle(a, books, config)
    for i in range(8):  # batch took the idle cluster
        slave = f"s{i // 4}"
        book_running(a, books, "batch", slave, f"t{i}", TASK, i)
    books.demand["p1"] = [(dict(TASK.millis), GUARANTEE)]
    books.demand["p2"] = [(dict(TASK.millis), GUARANTEE)]

    claims = []
    for now in (0.0, 1.0, 2.0, 3.0):  # past the guarantee's timeout
        claims += cycle.check(now).claims
    victims = [v.task_id for c in claims for p in c.plans for v in p.victims]
    assert len(victims) <= GUARANTEE, (
        f"role prod, guaranteed {GUARANTEE} CPUs and holding none, had {len(victims)} of "
        f"batch's tasks doomed ({sorted(victims)}) by the claims "
        f"{[(c.claimant, c.why, len(c.plans)) for c in claims]}: batch keeps "
        f"{8 - len(victims)} against its fair share of 4"
    )
