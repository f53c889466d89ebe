"""Review 70: a multi-role framework that suppresses its first role alone is taken to want
nothing, in every role: its guaranteed second role, which still wants offers, is never
preempted for.

`cycle.claims.contender` reads whether the framework wants offers from its first role's
client (`a.frameworks.get(a.clients.first(fid))`, "the one a claim's hold is offered to"):
`held_for` is false once that client is suppressed, and the contender `wants` nothing.
Review 69's multi-role case (b62e400): hydra in `h-batch` and `h-web`, `h-web` guaranteed
6 CPUs and holding none, declares 6 tasks. Done with its batch work, it suppresses
`h-batch` (SUPPRESS with roles, as Mesos's) and keeps `h-web` open -- and its guarantee is
never preempted for, while xena holds 6 CPUs against its fair 4. With `h-batch` open the
same claim dooms xena's tasks (review 69's test).
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


def test_a_guaranteed_role_still_wanting_is_preempted_for_when_the_first_is_suppressed() -> None:
    config = CycleConfig(
        policy="hdrf", preemption=PreemptionConfig(guarantee_timeout=1.0, notice=1.0)
    )
    a, books = Allocator("hdrf"), Books()
    a.roles.set_quota("h-web", Quota(guarantee=Resources(cpus=6)))
    roles = ["h-batch", "h-web"]
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
    cycle.suppress("hydra", ["h-batch"])  # done with batch; h-web still wants offers
    assert not a.suppressed("hydra/h-web")

    claims = []
    for now in (0.0, 1.0, 2.0, 3.0):  # a check a second, past the guarantee's timeout
        claims += cycle.check(now).claims
    victims = {v.framework_id for c in claims for p in c.plans for v in p.victims}
    assert victims == {"xena"}, (
        f"h-web, guaranteed 6 CPUs, holds none and still wants offers (only h-batch is "
        f"suppressed), while xena holds 6 against its fair 4: preemption made {claims}"
    )
