"""A `fifo` pool's fair shares are the allocator's: its children by arrival, the first
taking what it wants of the pool's part (`tree_ideal.tree_filling`'s `fifo`).

The ideal weighed a fifo pool's children by their shares, as a `drf` pool's: in pool
`batch` (fifo), `first` running 8 tasks on 8 CPUs and `late` declaring 8, preemption read
a fair share of 1/2 for `late`. Review 69 kept it from taking `first`'s tasks
(`Cluster._first_come`), but `late` stood starving below that share for ever: `why` and
the state said so, and offers `first` sat on were taken back as a hoarder's for it."""

from __future__ import annotations

import pytest

from master.allocation.allocator import Allocator
from master.allocation.fair_shares import Contender, fair_allocation
from master.allocation.ideal import User, ideal
from master.allocation.preemption import PreemptionConfig
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.allocation import fill
from harness.cycle import Books, book_running

TASK = Resources(cpus=1, mem=1024)


@pytest.mark.parametrize("policy", ["hdrf", "naive-hdrf"])
def test_the_ideal_fills_a_fifo_pools_children_by_arrival(policy: str) -> None:
    """Pool p (fifo) beside role c: p has its half; of it the first child takes what it
    wants (2 of 8 tasks), the second the rest, the third nothing."""
    users = [
        User("first", {"cpus": 1}, path=("p", "x"), limit=2),
        User("second", {"cpus": 1}, path=("p", "y")),
        User("third", {"cpus": 1}, path=("p", "z")),
        User("other", {"cpus": 1}, path=("c",)),
    ]
    shares = ideal(policy, {"cpus": 16}, users, fifo=[("p",)])
    tasks = {name: share.tasks for name, share in shares.items()}
    assert tasks == {"first": 2, "second": 6, "third": 0, "other": 8}
    assert ideal(policy, {"cpus": 16}, users)["third"].tasks > 0  # (a drf pool: by shares)


def test_a_late_child_of_a_fifo_pool_is_not_starving() -> None:
    a, books = Allocator("hdrf"), Books()
    a.roles.set_ordering("batch", "fifo")
    for i in range(2):
        a.add_slave(f"s{i}", Resources(cpus=4, mem=4096))
    cycle = OfferCycle(
        a, books, CycleConfig(policy="hdrf", preemption=PreemptionConfig(timeout=1.0))
    )
    for name in ("first", "late"):
        a.add_framework(name, f"batch/{name}")
        books.roles[name] = f"batch/{name}"
        books.demand[name] = [(dict(TASK.millis), 8)]
    for i in range(8):
        slave = f"s{i % 2}"
        book_running(a, books, "first", slave, f"t{i}", TASK, i)
    cycle.check(10.0)
    assert cycle.preemption.fair == {"first": 1.0, "late": 0.0}
    assert "late" not in cycle.preemption.starving_since


@pytest.mark.parametrize("policy", ["hdrf", "naive-hdrf", "flat"])
def test_a_fifo_pool_stands_among_its_siblings_by_its_own_share(policy: str) -> None:
    """Pool a (fifo: x came before y) beside role c, of equal weights, on 8 slaves of one
    task each: the allocator gives a its half, all of it to x, and c the other half, as
    the ideal has it. Under hdrf and flat a fifo pool's key was its first child's, 0
    (arrival orders them, so their shares count as nothing): it came before c at every
    offer, and took 7 of the 8 slaves."""
    a = Allocator(policy)
    a.roles.set_ordering("a", "fifo")
    for s in range(8):
        a.add_slave(f"s{s}", Resources(cpus=1, mem=1024))
    for name, role in (("x", "a/x"), ("y", "a/y"), ("c", "c")):
        a.add_framework(name, role)
    running = fill(a, dict.fromkeys(("x", "y", "c"), TASK))
    assert running == {"x": 4, "y": 0, "c": 4}
    users = [User(n, {"cpus": 1}, path=tuple(r.split("/"))) for n, r in (("x", "a/x"),
             ("y", "a/y"), ("c", "c"))]  # fmt: skip
    if policy != "flat":  # (the flat ideal is weighted drf: its pools have no order)
        shares = ideal(policy, {"cpus": 8}, users, fifo=[("a",)])
        assert {n: s.tasks for n, s in shares.items()} == running


@pytest.mark.parametrize("policy", ["hdrf", "naive-hdrf"])
def test_a_fifo_role_without_sub_roles_orders_nothing(policy: str) -> None:
    """Role q set `fifo` has frameworks of its own and no sub-roles: there is nothing for
    its ordering to order, and the allocator shares q between them by drf (a role's
    frameworks are ordered so). The ideal served them by arrival, as a fifo pool's
    children: the first owed the whole cluster and the second nothing, so the second
    never read as starving (and the first's offers were taken back as a hoarder's)."""
    a = Allocator(policy)
    a.roles.set_ordering("q", "fifo")
    for s in range(8):
        a.add_slave(f"s{s}", Resources(cpus=1, mem=1024))
    for name in ("x", "y"):
        a.add_framework(name, "q")
    assert fill(a, dict.fromkeys(("x", "y"), TASK)) == {"x": 4, "y": 4}
    contenders = [Contender(n, "q", 1.0, {}, True, shape=dict(TASK.millis)) for n in ("x", "y")]
    total = dict(a.total.millis)
    found = fair_allocation(policy, total, contenders, a.roles.pool_weights(), a.roles.fifo_pools())
    assert {n: share for n, (share, _) in found.items()} == {"x": 0.5, "y": 0.5}
