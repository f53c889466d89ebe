"""Review 69: under `hdrf`, the frameworks of a role that is also a pool each stand beside
its sub-roles in preemption's ideal, where the allocator puts them together as the pool's
child "." -- so a tenant in `eng` takes `eng/web` down by registering frameworks.

The role tree orders a role's own frameworks as one child of it (".", weight 1) beside
its sub-roles (`role_tree`; `test_hdrf_property` builds on it). The ideal
(`preemption.fair_allocation` into `tree_ideal`) places each framework at its role's
path, a user of its own at node `eng`, a sibling of pool `eng/web`. alice runs in
`eng/web`; mallory's three frameworks in `eng`. The allocator gives each child of `eng`
half of the 8 CPUs: alice 4, mallory's three 4 between them. The ideal gives each of the
four a quarter: alice "holds twice her share", and 2 of her 4 tasks are claimed for
mallory's frameworks (6 of 8 to mallory; more frameworks, more).
"""

from __future__ import annotations

from master.allocation.allocator import Allocator
from master.allocation.planning import RunningTask
from master.allocation.preemption import PreemptionConfig
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books

TASK = Resources(cpus=1, mem=1024)
ROLES = {"alice": "eng/web", "m1": "eng", "m2": "eng", "m3": "eng"}


def test_a_roles_own_frameworks_share_one_childs_part_of_its_pool() -> None:
    config = CycleConfig(
        policy="hdrf", preemption=PreemptionConfig(timeout=1.0, notice=1.0, threshold=1.0)
    )
    a, books = Allocator("hdrf"), Books()
    for i in range(2):
        a.add_slave(f"s{i}", Resources(cpus=4, mem=4096))
    for name, role in ROLES.items():
        a.add_framework(name, role)
        books.roles[name] = role
        books.demand[name] = [(dict(TASK.millis), 100)]
    cycle = OfferCycle(a, books, config)
    n, now = 0, 0
    for now in range(100):  # one task an offer, the rest given back: the order decides
        offers = a.allocate(float(now))
        if not offers:
            break
        for o in offers:
            n += 1
            books.tasks[(o.framework_id, f"t{n}")] = RunningTask(
                o.framework_id, f"t{n}", o.slave_id, dict(TASK.millis), float(now)
            )
            a.recover(o.framework_id, o.slave_id, o.resources - TASK, refuse_seconds=0)
    assert a.allocation("alice").get("cpus") == 4  # the allocator: half of eng is eng/web's

    claims = []
    for t in range(4):  # a check a second, past preemption's timeout
        claims += cycle.check(float(now + 10 + t)).claims
    victims = [(v.framework_id, v.task_id) for c in claims for p in c.plans for v in p.victims]
    assert victims == [], (
        f"alice (eng/web) holds the half of eng the allocator gives her, yet {victims} were "
        f"claimed for {[c.claimant for c in claims]} (eng); fair shares as preemption "
        f"reads them: {cycle.preemption.fair}"
    )
