"""Review 69: under `hdrf`, preemption stands every framework of the default role `*` alone
at the root, where the allocator orders `*` as one role: a tenant allowed `*` multiplies
its fair share by registering frameworks there.

`planning_path` and `fair_allocation` give a framework of role `*` (or none) no role: it
is a user of its own beside the roles, weight 1. The allocator adds `*` to the role tree
as any role, its frameworks sharing its share. With alice in role `alice` and three
frameworks of one tenant in `*`, the allocator gives each role half of the 16 CPUs; the
ideal gives each of the four a quarter, so alice "holds twice her share", and the three
"starve" at 8 CPUs between them: preemption takes alice down to 4, and `*` up to 12.
(The flat policies divide `*`'s weight among its frameworks, and agree with the
allocator.)
"""

from __future__ import annotations

from master.allocation.allocator import Allocator
from master.allocation.preemption import PreemptionConfig
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books, book_running, doomed

TASK = Resources(cpus=1, mem=1024)
SLAVE = Resources(cpus=4, mem=4096)


def test_frameworks_of_the_default_role_share_one_roles_fair_share() -> None:
    config = CycleConfig(
        policy="hdrf", preemption=PreemptionConfig(timeout=2.0, notice=1.0, threshold=1.0)
    )
    a, books = Allocator("hdrf"), Books()
    for i in range(4):
        a.add_slave(f"s{i}", SLAVE)
    roles = {"alice": "alice", "m1": "*", "m2": "*", "m3": "*"}
    for name, role in roles.items():
        a.add_framework(name, role)
        books.roles[name] = role
    cycle = OfferCycle(a, books, config)
    holders = ["alice"] * 8 + ["m1"] * 3 + ["m2"] * 3 + ["m3"] * 2  # each role half
    for i, name in enumerate(holders):
        slave = f"s{i // 4}"
        book_running(a, books, name, slave, f"t{i}", TASK, i)
    for name in ("alice", "m1", "m2", "m3"):
        books.demand[name] = [(dict(TASK.millis), 100)]  # every one wants more
    # the allocator's order: the roles are even, neither comes before the other for a free
    assert a.roles.share("alice") == a.roles.share("*")

    # a check a second, past preemption's timeout
    victims = [v.task_id for v in doomed(cycle, map(float, range(6)))]
    assert victims == [], (
        f"role alice holds 8 of 16 CPUs, its half beside role *; yet {len(victims)} of "
        f"alice's tasks were claimed for the frameworks in *; fair shares as preemption "
        f"reads them: {cycle.preemption.fair}"
    )
