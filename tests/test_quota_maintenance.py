"""A role's guarantee beside an operator's maintenance (the allocator alone, no master):
what is set aside for a guarantee is set aside where it can be offered. A slave an
operator took out of the offers (DEACTIVATE_AGENT, a drain) offers nothing, so its idle
resources are no headroom for anybody."""

from __future__ import annotations

from master.allocation.allocator import Allocator
from master.allocation.quota import Quota
from protocol.wire.resources import Resources

from harness.allocation import fill

SLAVE = Resources(cpus=4, mem=4096)
CPU_TASK = Resources(cpus=1, mem=256)


def test_a_guarantee_held_for_a_role_is_held_on_slaves_that_can_be_offered() -> None:
    """prod's guarantee (4 CPUs) is set aside for it before its framework comes (Mesos's
    default headroom, `all`). s1 is deactivated for maintenance and empty: its 4 idle
    CPUs are no room prod can be offered, so batch may not take s0's 4 as well, and
    prod has its guarantee the moment it comes (docs/explanation/allocation.md: what a
    guarantee still lacks is held back from everyone else)."""
    allocator = Allocator("hdrf")
    allocator.add_framework("early", "batch")
    allocator.add_framework("late", "prod")
    allocator.add_slave("s0", SLAVE)
    allocator.add_slave("s1", SLAVE)
    allocator.deactivate_slave("s1")  # an operator's DEACTIVATE_AGENT (or a drain)
    allocator.deactivate("late")  # not here yet
    allocator.roles.set_quota("prod", Quota(Resources(cpus=4)))
    running = fill(allocator, {"early": CPU_TASK, "late": CPU_TASK})
    allocator.activate("late")
    running = fill(allocator, {"early": CPU_TASK, "late": CPU_TASK})
    assert running["late"] == 4, (
        f"prod runs {running['late']} of its guaranteed 4 CPUs: what was held for it was "
        "the deactivated slave's, and batch took every CPU that can be offered"
    )
