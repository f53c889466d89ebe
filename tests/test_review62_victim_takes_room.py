"""Review 62 (on e5e0cc1): a victim that takes its kill grace has the honest claimant
counted for a room it was never offered.

e5e0cc1 judges a claim whose victims outlived its hold TAKE_AFTER (5 s) after their end:
unused unless the claimant launched in the room by then (`_Claimed.left_unused`: "True
if ended is not None"), whether it was offered the room or not. But after the hold the
room is held for nobody: it goes to whoever is first in the DRF order. The tenant whose
tasks are preempted (A, over its share) traps SIGTERM through a 30 s grace (the hold is
14 s) and runs a second framework, V, in another role of its own with nothing running
(share 0, below the claimant's): the room its victim frees goes to V, and the honest
claimant C -- which launches a task in every room it is offered -- has its claim judged
unused and waits 60 s, 120 s, 240 s... before preemption frees room for it again. The
tenant keeps half the room freed (moved from A to V), and C is starved for claims it
could not use: below, C (1 task of 12 cpus, wanting 3 more) claims at 5 s, 98 s and
251 s, two claims judged unused in a row, and has its 3 tasks at 283 s; without V, one
claim at 5 s, all 3 rooms C's at 37 s. (Threshold 0.9: C starves below 0.9 of its fair
share, an operator's setting.)

On the offer cycle with the books in memory (the harness of
tests/test_review59_slow_victims.py), a check and a round a second."""

from __future__ import annotations

from master.allocation.allocator import Allocator
from master.allocation.preemption import PreemptionConfig
from master.cycle import CycleConfig, OfferCycle

from harness.cycle import SLAVE, TASK, Books, book_running, end_after_grace

GRACE = 30.0  # the victims' kill policy's grace: a service's, within --max-kill-grace
WINDOW = 300.0  # seconds watched


def test_a_claimant_never_offered_the_room_is_not_counted_for_leaving_it_unused() -> None:
    config = CycleConfig(preemption=PreemptionConfig(timeout=5.0, notice=2.0, threshold=0.9))
    allocator, books = Allocator("drf"), Books()
    for name in ("A", "C", "V"):
        allocator.add_framework(name, name)
        books.roles[name] = name
    for i in range(3):
        allocator.add_slave(f"s{i}", SLAVE)
    cycle = OfferCycle(allocator, books, config)

    def run(framework_id: str, slave: str, task_id: str, now: float) -> None:
        book_running(allocator, books, framework_id, slave, task_id, TASK, now)

    for i in range(11):  # A fills the slaves but for C's one task
        run("A", f"s{i % 3}", f"t{i}", i)
    run("C", "s2", "c0", 0)
    books.demand["C"] = [(dict(TASK.millis), 3)]  # C wants 3 more, and runs what it gets
    now, claims, unused_seen = 0.0, list[float](), 0
    offered = {"C": 0, "V": 0}
    ending: dict[tuple[str, str], tuple[float, str]] = {}  # victim: when it ends, where
    while now < WINDOW:  # a check and a round a second, as the master's
        plan = cycle.check(now)
        claims += [now for c in plan.claims if c.claimant == "C"]
        end_after_grace(cycle, books, ending, now, GRACE)  # SIGTERM now; ends after its grace
        for o in cycle.round(now).offers:
            allocator.recover(o.framework_id, o.slave_id, o.resources)
            fits = int(o.resources.quantities().get("cpus", 0))
            if o.framework_id in offered:
                offered[o.framework_id] += 1
            if o.framework_id == "C":  # honest: launches what it wants of every offer
                want = books.demand["C"][0][1] if books.demand.get("C") else 0
                for n in range(min(fits, want)):
                    run("C", o.slave_id, f"c{now}-{o.slave_id}-{n}", now)
                    cycle.launched("C", o.slave_id, TASK)
                    left = books.demand["C"][0][1] - 1
                    books.demand["C"] = [(dict(TASK.millis), left)] if left else []
            else:  # A's other framework (and A) run a task in what they are offered
                for n in range(fits):
                    run(o.framework_id, o.slave_id, f"{o.framework_id}{now}-{o.slave_id}-{n}", now)
        unused_seen = max(unused_seen, cycle.preemption.claim_use.unused("C"))
        now += 1.0
    assert unused_seen == 0, (
        f"C, which launches a task in every room it is offered, was offered {offered['C']} "
        f"rooms and had {unused_seen} claims in a row judged unused ({len(claims)} claims "
        f"at {claims}); the rooms A's victims freed after the hold went to A's second "
        f"framework V ({offered['V']} offers), and C still wants "
        f"{books.demand['C'][0][1] if books.demand.get('C') else 0} more tasks"
    )
