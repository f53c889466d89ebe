"""Review 69: under the flat policies, preemption divides a role's weight among all its
frameworks, those that want nothing too, so a tenant with an idle framework in its role
can be preempted to a third by another of equal weight.

`Allocator.framework_weight` gives each framework its role's weight over the number of
frameworks in the role, suppressed or disconnected ones included; the ideal
(`fair_allocation`) leaves out those that want nothing, and with them the weight they
were counted for. alice's role runs `alice` (wanting more) and `alice-idle` (suppressed,
holding nothing); mallory's role runs mallory. The allocator orders the two roles evenly
(4 CPUs each of 8); preemption reads 1/3 for alice and 2/3 for mallory, and takes alice
from 4 tasks to 3 (to 2.67, in whole tasks) for mallory.
"""

from __future__ import annotations

from master.allocation.allocator import Allocator
from master.allocation.preemption import PreemptionConfig
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books, book_running, doomed

TASK = Resources(cpus=1, mem=1024)
SLAVE = Resources(cpus=4, mem=4096)


def test_a_framework_that_wants_nothing_does_not_halve_its_roles_fair_share() -> None:
    config = CycleConfig(preemption=PreemptionConfig(timeout=2.0, notice=1.0, threshold=1.0))
    a, books = Allocator("drf"), Books()
    for i in range(2):
        a.add_slave(f"s{i}", SLAVE)
    roles = {"alice": "alice", "alice-idle": "alice", "mallory": "mallory"}
    for name, role in roles.items():
        a.add_framework(name, role)
        books.roles[name] = role
    cycle = OfferCycle(a, books, config)
    cycle.suppress("alice-idle")  # (its work done: it wants no offers)
    for i, name in enumerate(["alice"] * 4 + ["mallory"] * 4):  # each role half
        slave = f"s{i // 4}"
        book_running(a, books, name, slave, f"t{i}", TASK, i)
    books.demand.update(
        {"alice": [(dict(TASK.millis), 100)], "mallory": [(dict(TASK.millis), 100)]}
    )
    assert a.roles.share("alice") == a.roles.share("mallory")  # the allocator: even

    # a check a second, past preemption's timeout
    victims = [(v.framework_id, v.task_id) for v in doomed(cycle, map(float, range(6)))]
    assert victims == [], (
        f"roles alice and mallory, of weight 1, hold 4 of 8 CPUs each; yet {victims} were "
        f"claimed; fair shares as preemption reads them: {cycle.preemption.fair}"
    )
