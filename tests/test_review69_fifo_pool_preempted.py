"""Review 69: preemption's ideal ignores a pool's ordering, so a tenant that comes late to
a `fifo` pool has the first one's tasks killed for half the pool.

A roles file may order a pool's children `fifo` (arrival order: the first takes all it
wants, the next waits) or `fair` (memory alone). The allocator does (`role_tree`); the
fair shares preemption measures starving and victims by (`preemption.fair_allocation`)
are given only the pools' weights (`RoleSettings.pool_weights`), and weigh every pool
`hdrf`'s way. In pool `batch` (ordering fifo), `first` runs 8 tasks on 8 CPUs and wants
more; `late` comes and declares 8. The allocator gives what frees to `first`, as fifo
says; preemption reads a fair share of 1/2 for `late`, finds it starving, and kills 4 of
`first`'s tasks for it -- half the pool to the late tenant, against the operator's order.
"""

from __future__ import annotations

from master.allocation.allocator import Allocator
from master.allocation.planning import RunningTask
from master.allocation.preemption import PreemptionConfig
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books, book_running, doomed

TASK = Resources(cpus=1, mem=1024)
SLAVE = Resources(cpus=4, mem=4096)


def test_a_late_child_of_a_fifo_pool_does_not_preempt_the_first() -> None:
    a, books = Allocator("hdrf"), Books()
    a.roles.set_ordering("batch", "fifo")
    for i in range(2):
        a.add_slave(f"s{i}", SLAVE)
    cycle = OfferCycle(
        a, books, CycleConfig(policy="hdrf", preemption=PreemptionConfig(timeout=1.0, notice=1.0))
    )
    for name in ("first", "late"):
        a.add_framework(name, f"batch/{name}")
        books.roles[name] = f"batch/{name}"
    for i in range(8):  # first came first and took the cluster
        slave = f"s{i % 2}"
        book_running(a, books, "first", slave, f"t{i}", TASK, i)
    books.demand.update({"first": [(dict(TASK.millis), 8)], "late": [(dict(TASK.millis), 8)]})
    # the allocator keeps the pool's order: a task of first's ends, and first is offered it
    books.tasks.pop(("first", "t0"))
    a.recover("first", "s0", TASK)
    assert [o.framework_id for o in cycle.round(10.0).offers] == ["first"]
    a.recover("first", "s0", TASK)
    a.allocate_existing("first", "s0", TASK)  # (it launches again there)
    books.tasks[("first", "t8")] = RunningTask("first", "t8", "s0", dict(TASK.millis), 10.0)

    # a check a second, past preemption's timeout
    victims = [v.task_id for v in doomed(cycle, (11.0, 12.0, 13.0, 14.0))]
    assert victims == [], (
        f"late, second in fifo pool batch, had {len(victims)} of first's tasks claimed "
        f"({victims}); fair shares as preemption reads them: {cycle.preemption.fair}"
    )
