"""Review 74: a fifo pool's children are served in two arrival orders that need not
agree -- the allocator's (`RoleTree`: when a child role's node was made, `Node.order`) and
preemption's ideal (`fair_allocation`'s `fifo_pools`, 9b927db: the contenders' order, that
is the frameworks' subscription order) -- and a tenant that came first loses the pool for
good while preemption reads her as owed all of it.

Pool `q` (fifo) is the whole cluster (2 slaves of 4 CPUs). mallory subscribes a framework
`m1` in `q/a` that declines everything, so `q/a` is the pool's first child; alice then
subscribes in `q/b`, declares 8 tasks (60 s each, one more wanted as each ends: a steady
workload) and runs the whole pool; mallory then subscribes `m2` in `q/a`, declaring the
same, and tears `m1` down. Node `q/a` lives on (m2 is in it) and keeps its place before
`q/b`: the allocator offers every room alice's tasks free to m2, and within a minute m2
holds the pool and alice nothing. The ideal reads the frameworks in their order (alice
before m2): alice is owed the whole pool, m2 nothing -- alice starves for ever, and
planning takes nothing from one child of a fifo pool for another, so preemption never
gives it back (and `why` tells alice she is owed 100%). With m2 subscribed straight away
(no placeholder) both orders agree: alice keeps the pool.

A roles file does it without mallory's help: `RoleSettings.apply` sets every listed
role's ordering, which makes its node (`RoleTree._ensure`) in the file's order, so a file
listing `q/a` before `q/b` serves `q/a` first whoever came first.

A tenant relies on the order the docs give ("a fifo pool serves its children by arrival,
the first takes all it wants") and on preemption giving back what that order owes it.

Fixed: a child's place is the earliest arrival of its frameworks still subscribed (the
allocator numbers them as they come: `RoleTree.set_arrival`), and the ideal is given the
tree's order (`fifo_pools`) rather than making its own from the contenders'.
"""

from __future__ import annotations

import pytest

from master.allocation.allocator import Allocator

from harness.review74 import Tenant, simulate

WINDOW = 400.0
POOL = 8  # tasks


def fifo(a: Allocator) -> None:
    a.roles.set_ordering("q", "fifo")


def fifo_from_file(a: Allocator) -> None:
    """As `RoleSettings.apply` reads a roles file listing q, q/a, q/b (each's ordering)."""
    for role, ordering in (("q", "fifo"), ("q/a", "drf"), ("q/b", "drf")):
        a.roles.set_ordering(role, ordering)


def tenants(placeholder: bool) -> list[Tenant]:
    out = [
        Tenant("alice", "q/b", "alice", declare=POOL, joins=1.0, runs=60.0),
        Tenant("m2", "q/a", "mallory", declare=POOL, joins=20.0, runs=60.0),
    ]
    if placeholder:
        out.insert(0, Tenant("m1", "q/a", "mallory", uses=False, leaves=21.0))
    return out


@pytest.mark.parametrize("how", ["placeholder", "roles-file"])
def test_the_first_come_to_a_fifo_pool_keeps_it(how: str) -> None:
    honest = simulate(tenants(False), WINDOW, {}, policy="hdrf", setup=fifo)
    assert honest.running("alice") >= POOL - 1  # (the rig: alice, first, keeps the pool)
    if how == "placeholder":
        run = simulate(tenants(True), WINDOW, {}, policy="hdrf", setup=fifo)
    else:
        run = simulate(tenants(False), WINDOW, {}, policy="hdrf", setup=fifo_from_file)
    fair = run.cycle.preemption.fair
    assert run.running("alice") >= POOL - 1, (
        f"alice came first to fifo pool q and runs {run.running('alice')} of its {POOL} "
        f"tasks after {WINDOW:.0f} s, m2 (come later) {run.running('m2')}; preemption "
        f"reads fair shares {fair} and gives nothing back"
    )
