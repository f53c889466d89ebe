"""Review 69: a multi-role framework's role with a quota guarantee is never preempted for.

Preemption's guarantee check (`Preemption._guarantee_claims`) counts a role's members by
`Contender.role`, which for a multi-role framework is its first role alone
(`cycle.claims.contender`), holding all it holds in every role. A tenant given `h-batch`
and `h-web`, with a guarantee of 6 CPUs on `h-web`, that runs one framework in both:
its guaranteed role holds nothing, wants 6 tasks, and waits for ever -- preemption either
finds no member of `h-web` wanting (the framework is counted in `h-batch`), or (with
`h-web` first) counts its `h-batch` tasks as `h-web`'s and finds the guarantee met. Another
tenant over its own fair share keeps what it holds.
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


def cluster(roles: list[str]) -> tuple[OfferCycle, Books]:
    """Three slaves (12 CPUs), roles h-web (guaranteed 6 CPUs), h-batch and x, weight 1
    each; hydra in `roles` holds 6 tasks in h-batch, and wants 6 more; xena (role x) holds
    the other 6, 2 over its third."""
    config = CycleConfig(
        policy="hdrf", preemption=PreemptionConfig(guarantee_timeout=1.0, notice=1.0)
    )
    a, books = Allocator("hdrf"), Books()
    a.roles.set_quota("h-web", Quota(guarantee=Resources(cpus=6)))
    a.add_framework("hydra", roles=roles)
    a.add_framework("xena", "x")
    books.roles.update({"hydra": roles[0], "xena": "x"})  # (as the master's: its first)
    for i in range(3):
        a.add_slave(f"s{i}", SLAVE)
    cycle = OfferCycle(a, books, config)
    for i in range(12):
        fid, slave = ("hydra", f"s{i // 4}") if i < 6 else ("xena", f"s{i // 4}")
        book_running(a, books, fid, slave, f"t{i}", TASK, i, "h-batch" if fid == "hydra" else None)
    books.demand["hydra"] = [(dict(TASK.millis), 6)]
    return cycle, books


@pytest.mark.parametrize("roles", [["h-batch", "h-web"], ["h-web", "h-batch"]])
def test_a_multi_role_frameworks_guaranteed_role_is_preempted_for(roles: list[str]) -> None:
    cycle, _ = cluster(roles)
    a = cycle.allocator
    assert a.allocation("hydra", "h-web") == Resources()  # its guaranteed role: nothing
    assert a.allocation("xena").get("cpus") == 6  # over its third of 12 CPUs
    claims = []
    for now in (0.0, 1.0, 2.0, 3.0):  # a check a second, past the guarantee's timeout
        claims += cycle.check(now).claims
    victims = {v.framework_id for c in claims for p in c.plans for v in p.victims}
    assert victims == {"xena"}, (
        f"role h-web, guaranteed 6 CPUs, holds none and its framework wants 6, while xena "
        f"holds 6 CPUs against its fair 4: preemption made {claims}"
    )
