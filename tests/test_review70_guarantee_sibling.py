"""Review 70: under a guaranteed parent, a sub-role's guarantee is never preempted for
from a sibling that holds the parent's whole guarantee: the move would leave the parent
as it is, but `guarantee_rule` counts only the victim's loss.

`guarantee_rule` (09a900c) lets a task go to a role short of its guarantee "so long as
each guarantee on its own role's path stays met without the task": for every node on
the victim's path it subtracts the task from what the node holds, and refuses if the
node's guarantee then has a gap. It never adds the task back where the claimant stands.
`prod` is guaranteed 8 CPUs, `prod/web` 4 of them (nested as Mesos has it); the cluster's
8 CPUs all run tasks of `prod/batch` (another tenant of prod's, no guarantee of its own).
`prod/web` wants 4 and holds none: freeing 4 of prod/batch's tasks for it leaves `prod`
at 8, its guarantee met, and `prod/web` at its own. But each of prod/batch's tasks would
take `prod` to 7 < 8 "without the task": refused, every one, and `prod/web` waits below
its guarantee for as long as prod/batch's tasks run (with --guarantee-timeout alone).
"""

from __future__ import annotations

from master.allocation.allocator import Allocator
from master.allocation.preemption import PreemptionConfig
from master.allocation.quota import Quota
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books, book_running, doomed

TASK = Resources(cpus=1, mem=1024)
SLAVE = Resources(cpus=4, mem=4096)


def test_a_sub_roles_guarantee_takes_from_its_sibling_under_a_met_parent() -> None:
    config = CycleConfig(
        policy="hdrf", preemption=PreemptionConfig(guarantee_timeout=1.0, notice=1.0)
    )
    a, books = Allocator("hdrf", quota_headroom="demand"), Books()
    a.roles.set_quota("prod", Quota(guarantee=Resources(cpus=8)))
    a.roles.set_quota("prod/web", Quota(guarantee=Resources(cpus=4)))
    for i in range(2):
        a.add_slave(f"s{i}", SLAVE)
    for fid, role in (("pb", "prod/batch"), ("pw", "prod/web")):
        a.add_framework(fid, role)
        books.roles[fid] = role
    cycle = OfferCycle(a, books, config)
    for i in range(8):  # prod/batch runs on every CPU: prod at its guarantee
        slave = f"s{i // 4}"
        book_running(a, books, "pb", slave, f"t{i}", TASK, i)
    books.demand["pw"] = [(dict(TASK.millis), 4)]

    # past the guarantee's timeout
    victims = sorted(v.task_id for v in doomed(cycle, (0.0, 1.0, 2.0, 3.0, 4.0)))
    assert len(victims) == 4, (
        f"prod/web, guaranteed 4 CPUs and holding none, had {victims} of prod/batch's tasks "
        f"doomed: prod holds its guarantee of 8 whichever of its sub-roles runs them, and "
        f"prod/batch has no guarantee"
    )
