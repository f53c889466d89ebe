"""The quota stage as Mesos 1.9's allocator runs it (`HierarchicalAllocatorProcess::
__generateOffers`, its first stage): a role below its guarantee is served ahead of the
fair order only on a slave that has some of what its guarantee lacks ("We allocate this
agent only if the role can make progress towards its quota guarantees": an empty
`guaranteesOffering` is skipped, the slave left to the second stage's order), and there
it is offered its guarantee and, in the same offer, more of it up to its limit, so long
as every unmet guarantee, its own included, is still left free (the "bursting above
guarantees up to the limits in the 1st stage", since Mesos 1.9: commit 7df8cc6b7)."""

from __future__ import annotations

import pytest

from master.allocation.allocator import Allocator
from master.allocation.quota import Quota
from protocol.wire.resources import Resources

POLICIES = ["drf", "hdrf", "naive-hdrf"]


@pytest.mark.parametrize("policy", POLICIES)
def test_a_role_short_of_a_resource_no_slave_here_has_waits_its_fair_turn(policy: str) -> None:
    """`gpu` is guaranteed a gpu, and the one gpu slave is busy: its framework, already
    holding a third of the cpus, is not put first for every cpu slave ahead of `other`,
    which holds nothing. Mesos offers both slaves to `other` (the fair order)."""
    a = Allocator(policy)
    a.roles.set_quota("gpu", Quota(Resources(gpus=1)))
    a.add_framework("g", "gpu")
    a.add_framework("o", "other")
    busy = Resources(cpus=1, mem=100)
    a.add_slave("box", Resources(cpus=1, mem=100, gpus=1), used={"o": busy})
    a.add_slave("s1", Resources(cpus=4, mem=400), used={"g": Resources(cpus=3, mem=300)})
    a.add_slave("s2", Resources(cpus=4, mem=400))
    offers = {o.slave_id: o.framework_id for o in a.allocate(0.0)}
    assert offers == {"s1": "o", "s2": "o"}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("headroom", ["all", "demand"])
def test_a_guaranteed_role_bursts_past_its_guarantee_in_the_same_offer(
    policy: str, headroom: str
) -> None:
    """`q` is guaranteed 2 cpus, without a limit: offered a free 8-cpu slave, all 8 come
    in one offer (an 8-cpu task fits), not 2 with the other 6 -- without memory -- to
    the next framework in order."""
    a = Allocator(policy, quota_headroom=headroom)
    a.roles.set_quota("q", Quota(Resources(cpus=2)))
    a.add_framework("fq", "q")
    a.add_framework("fo", "other")
    a.add_slave("s1", Resources(cpus=8, mem=1024))
    assert [(o.framework_id, o.resources) for o in a.allocate(0.0)] == [
        ("fq", Resources(cpus=8, mem=1024))
    ]


@pytest.mark.parametrize("policy", POLICIES)
def test_a_burst_stops_at_the_limit_and_leaves_others_unmet_guarantees(policy: str) -> None:
    """`q` (guaranteed 2 cpus, limited to 5) bursts to its limit, and no further than
    leaves `p`'s unmet guarantee (3 cpus, no framework yet) free: of 6 cpus on two slaves,
    one free slave of 4 gives `q` 3 (2 guaranteed, 1 more: 3 stay for `p`)."""
    a = Allocator(policy)
    a.roles.set_quota("q", Quota(Resources(cpus=2), limit=Resources(cpus=5)))
    a.roles.set_quota("p", Quota(Resources(cpus=3)))
    a.add_framework("fq", "q")
    a.add_slave("s0", Resources(cpus=2, mem=256))
    a.deactivate("fq")  # (s0's round passes it by)
    a.allocate(0.0)
    a.activate("fq")
    a.add_slave("s1", Resources(cpus=4, mem=512))
    offers = a.allocate(1.0, ["s1"])
    assert [(o.framework_id, o.resources["cpus"]) for o in offers] == [("fq", 3)]
