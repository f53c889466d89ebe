"""Review 70: a role whose guarantee is short of a resource its tasks never use is immune
to every guarantee claim: `guarantee_rule` refuses any task whose loss leaves the
victim's guarantee with a gap, and a gap it already had (in another resource) counts.

The mirror of the unfillable-gap case. `hog` is guaranteed `cpus:2;disk:1024` and runs 8
tasks of 1 CPU and no disk: its disk gap is there whatever it runs. `prod`, guaranteed
4 CPUs and holding none, wants 4 tasks: taking 4 of hog's leaves hog 4 CPUs, twice its
CPU guarantee, and its disk where it was. But `gap(quota, after)` is never empty (the
disk), so every task of hog's is refused, and prod's guarantee waits for as long as
hog's tasks run.
"""

from __future__ import annotations

from master.allocation.allocator import Allocator
from master.allocation.preemption import PreemptionConfig
from master.allocation.quota import Quota
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books, book_running, doomed

TASK = Resources(cpus=1, mem=1024)
SLAVE = Resources(cpus=4, mem=4096, disk=8192)


def test_a_victims_gap_in_a_resource_its_task_does_not_hold_does_not_shield_it() -> None:
    config = CycleConfig(
        policy="hdrf", preemption=PreemptionConfig(guarantee_timeout=1.0, notice=1.0)
    )
    a, books = Allocator("hdrf", quota_headroom="demand"), Books()
    a.roles.set_quota("prod", Quota(guarantee=Resources(cpus=4)))
    a.roles.set_quota("hog", Quota(guarantee=Resources(cpus=2, disk=1024)))
    for i in range(2):
        a.add_slave(f"s{i}", SLAVE)
    for fid in ("hog", "prod"):
        a.add_framework(fid, fid)
        books.roles[fid] = fid
    cycle = OfferCycle(a, books, config)
    for i in range(8):  # hog took every CPU
        slave = f"s{i // 4}"
        book_running(a, books, "hog", slave, f"t{i}", TASK, i)
    books.demand["prod"] = [(dict(TASK.millis), 4)]

    # past the guarantee's timeout
    victims = sorted(v.task_id for v in doomed(cycle, (0.0, 1.0, 2.0, 3.0)))
    assert len(victims) == 4, (
        f"prod, guaranteed 4 CPUs and holding none, had {victims} of hog's 8 tasks doomed: "
        f"hog keeps 4 CPUs against its guarantee of 2 either way; its disk gap is no task's"
    )
