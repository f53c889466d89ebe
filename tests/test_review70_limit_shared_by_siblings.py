"""Review 70: under a limited parent role, a sub-role's demand is cut to nothing once
its sibling filled the parent's limit: it never starves, and its sibling keeps the
parent's whole limit against its own fair share for as long as its tasks run.

0a5c960 (review 69's limit case) cuts a framework's declared demand to what its role's
quota limits still let it be offered (`cycle.claims.within_limits`, from
`QuotaStage.offerable(role, ..., headroom=False)`: every limit on the role's path less
what that node holds). That is right for a role at its own limit, where no preemption
can give it anything. But a limit on a pool is shared by its sub-roles: `eng` is limited
to 4 CPUs, and alice's `eng/a` holds all 4. bob's `eng/b` declares 2 tasks and holds
none: the pool's limit "lets it be offered" nothing more, so it wants nothing, and is
never starving. Yet preempting 2 of alice's tasks for bob leaves `eng` at 4, within its
limit, and is what the fair shares say (the ideal gives `eng` half of the 8 CPUs,
`eng/a` and `eng/b` 2 each; xena's `x` the other 4). Before 0a5c960 bob's claim took
them; now alice keeps the pool's whole limit, and bob is offered nothing for ever.
"""

from __future__ import annotations

from master.allocation.allocator import Allocator
from master.allocation.preemption import PreemptionConfig
from master.allocation.quota import Quota
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books, book_running

TASK = Resources(cpus=1, mem=1024)
SLAVE = Resources(cpus=4, mem=4096)


def test_a_sub_role_under_a_full_limited_pool_is_preempted_for_from_its_sibling() -> None:
    config = CycleConfig(
        policy="hdrf", preemption=PreemptionConfig(timeout=2.0, notice=1.0, threshold=1.0)
    )
    a, books = Allocator("hdrf"), Books()
    a.roles.set_quota("eng", Quota(guarantee=Resources(), limit=Resources(cpus=4)))
    for i in range(2):
        a.add_slave(f"s{i}", SLAVE)
    for fid, role in (("alice", "eng/a"), ("bob", "eng/b"), ("xena", "x")):
        a.add_framework(fid, role)
        books.roles[fid] = role
    cycle = OfferCycle(a, books, config)
    for i, fid in enumerate(["alice"] * 4 + ["xena"] * 4):
        slave = f"s{i // 4}"
        book_running(a, books, fid, slave, f"t{i}", TASK, i)
    books.demand["bob"] = [(dict(TASK.millis), 2)]

    claims = []
    for now in range(6):  # a check a second, past preemption's timeout
        claims += cycle.check(float(now)).claims
    victims = sorted(
        (v.framework_id, v.task_id) for c in claims for p in c.plans for v in p.victims
    )
    fair = cycle.preemption.fair
    assert [f for f, _ in victims] == ["alice", "alice"], (
        f"bob (eng/b) holds nothing and declares 2 tasks; alice (eng/a) holds eng's whole "
        f"limit of 4 CPUs: claimed {victims}; fair shares as preemption reads them: {fair}"
    )
