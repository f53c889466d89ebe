"""Review 70: the room a guarantee claim frees for a multi-role framework's guaranteed role
is held in the framework's FIRST role: there it cannot be offered, the freed room stands
idle for the whole hold, and the claim is then judged unused -- the tenant is made to
wait for the master's mistake.

b62e400 made a multi-role framework's guaranteed role claim for itself (review 69). But
`hold_claim` holds the room through `Allocator.reserve`, which takes the framework's
first role's client (`clients.first`: "where what names no role goes"). hydra runs in
`h-batch` and `h-web`, `h-web` guaranteed 2 CPUs and holding none; xena's 2 tasks are
killed for it at 2 s. The hold is `hydra/h-batch`'s: the slaves are offered to nobody
else while it lasts, and `h-batch` is offered nothing of them either (the unmet guarantee
of `h-web` is held back from every other role's offers, `h-batch` included). The 2 freed
CPUs stand idle until the hold ends at 14 s, go to `h-web` then, and `ClaimUse` judges
the claim unused ("the room stood free and held for it while it did not want it"): hydra's
tenant waits 60 s (doubling) before its guarantee is preempted for again. Where the
headroom lets the hold's offer go out, it goes out in `h-batch`, whose tasks do nothing
for `h-web`'s guarantee.
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


def test_the_room_freed_for_a_guaranteed_second_role_is_offered_in_that_role() -> None:
    config = CycleConfig(
        policy="hdrf", preemption=PreemptionConfig(guarantee_timeout=1.0, notice=1.0)
    )
    a, books = Allocator("hdrf"), Books()
    a.roles.set_quota("h-web", Quota(guarantee=Resources(cpus=2)))
    roles = ["h-batch", "h-web"]
    a.add_framework("hydra", roles=roles)
    a.add_framework("xena", "x")
    books.roles.update({"hydra": roles[0], "xena": "x"})  # (as the master's: its first)
    for i in range(2):
        a.add_slave(f"s{i}", SLAVE)
    cycle = OfferCycle(a, books, config)
    for i in range(8):  # hydra runs 2 tasks in h-batch, xena the other 6
        fid, slave = ("hydra", f"s{i % 2}") if i < 2 else ("xena", f"s{i % 2}")
        book_running(a, books, fid, slave, f"t{i}", TASK, i, "h-batch" if fid == "hydra" else None)
    books.demand["hydra"] = [(dict(TASK.millis), 2)]  # for h-web, guaranteed 2 and holding 0

    claimed: set[str] = set()
    ended = None  # when the victims ended
    offered: list[tuple[float, str, str | None]] = []  # (when, slave, role) to hydra
    now = 0.0
    while now < 20.0:
        for claim in cycle.check(now).claims:
            claimed |= {p.slave_id for p in claim.plans}
        for kill in cycle.kills_due(now):  # the victims end
            books.tasks.pop((kill.framework_id, kill.task_id))
            cycle.task_ended(kill.framework_id, kill.task_id, finished=False, ran=1.0, now=now)
            a.recover(kill.framework_id, kill.slave_id, TASK)
            ended = now
        offered += [
            (now, o.slave_id, o.role)
            for o in cycle.round(now).offers
            if o.framework_id == "hydra" and o.slave_id in claimed
        ]
        now += 1.0
    assert claimed, "no claim for h-web, guaranteed 2 CPUs and holding none"
    assert ended is not None, "the victims of h-web's claim never ended"
    first = min((when for when, _, _ in offered), default=None)
    unused = cycle.preemption.claim_use.unused("hydra")
    prompt = first is not None and first <= ended + 1 and unused == 0
    assert prompt, (
        f"xena's tasks were killed for h-web at {ended:g} s; the room freed on "
        f"{sorted(claimed)} was offered to hydra as (time, slave, role) {offered}, and its "
        f"claim was judged unused {unused} time(s)"
    )
    assert all(role == "h-web" for _, _, role in offered), offered
