"""Review 69: preemption's planning takes a victim below its fair share when its tasks run
on resources reserved for its role: what a chosen task frees is taken off the victim's
books under the reserved names (`mem(alice)`), where its holdings are counted by their
resource (`mem`), so the victim never seems to shrink.

`plan_on_slave` and `_apply` subtract a victim task's `resources` (by identity, as the
books keep tasks) from `Cluster.held`, which the allocator gives stripped
(`Allocator.allocation`: reservations counted as their resource). The victim's dominant
share, read from `held` (`may_lose`), stays where it was whatever is taken of its
reserved room. Here alice runs 8 tasks of <1 CPU, 2 GB>, 4 of them on slave s0, whose
memory is reserved for her; mallory and bob each want CPUs alone. Fair shares are a third
each: alice may lose 5 tasks (3 of 8 CPUs stay above a third), and does when s0's memory
is unreserved; with it reserved, 6 are claimed, and she is left with 2 (a quarter).
"""

from __future__ import annotations

import pytest

from master.allocation.allocator import Allocator
from master.allocation.preemption import PreemptionConfig
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books, book_running, doomed

R = Resources.parse


@pytest.mark.parametrize("s0_mem", ["mem", "mem(alice)"])
def test_a_victim_on_its_reservation_keeps_its_fair_share(s0_mem: str) -> None:
    config = CycleConfig(preemption=PreemptionConfig(timeout=1.0, notice=1.0, threshold=1.0))
    a, books = Allocator("hdrf"), Books()
    a.add_slave("s0", R(f"cpus:4;{s0_mem}:8192"))
    a.add_slave("s1", R("cpus:4;mem:8192"))
    for name in ("alice", "mallory", "bob"):
        a.add_framework(name, name)
        books.roles[name] = name
    cycle = OfferCycle(a, books, config)
    k = 0
    for slave, task, started in (("s1", R("cpus:1;mem:2048"), 0.0),
                                 ("s0", R(f"cpus:1;{s0_mem}:2048"), 10.0)):  # fmt: skip
        for i in range(4):  # (s0's the younger: preemption's first choice)
            k += 1
            book_running(a, books, "alice", slave, f"t{k}", task, started + i)
    for name in ("mallory", "bob"):
        books.demand[name] = [(dict(R("cpus:1").millis), 100)]
    assert a.dominant_share("alice") == 1.0

    # past preemption's timeout
    victims = [v.task_id for v in doomed(cycle, (20.0, 21.0, 22.0))]
    fair = cycle.preemption.fair["alice"]
    left = 8 - len(victims)
    assert left / 8 >= fair - 1e-9, (
        f"alice's fair share is {fair:.3f} of the cluster, yet {len(victims)} of her 8 tasks "
        f"were claimed ({victims}): she is left with {left / 8:.3f}"
    )
