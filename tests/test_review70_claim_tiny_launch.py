"""Review 70: review 69's fix for claims filled with tasks that end at once is beaten by
answering the room, when it comes back, with one tiny task that ends at once and the
rest declined, in one Accept.

`ClaimUse` (18c3f3d) judges a claim unused when the claimant, after filling its rooms
with tasks that ended, turns a room down when it is offered back (`declined`, called for
an offer declined *whole*: a Decline, or an Accept that launches nothing). An Accept that
launches anything is not a whole decline: what it leaves goes back through
`OfferCycle.decline(whole=False)`, which tells `ClaimUse` nothing, and its launch clears
the slave's `turned_back` (`ClaimUse.launched`: "it came back to the room"). So B, holding
nothing, declaring 100 tasks, fills each freed room with tasks that finish at once, and
answers the room's return with one task of 0.1 CPU that finishes at once and the rest
refused for 4 s (short enough that no later claim's plan lands on a slave it filters).
Every claim is judged used; A (the only other tenant) loses its fair share's worth of
tasks claim after claim, while B runs nothing. The docs (allocation.md) promise a tenant
cannot "have others' tasks killed every --preemption-timeout seconds for nothing".
"""

from __future__ import annotations

from master.allocation.claim_use import FIRST_WAIT
from master.allocation.planning import RunningTask
from protocol.wire.resources import Resources

from harness.cycle import TASK, end_kills, hog_and_claimant

TINY = Resources(cpus=0.1, mem=16)
FAIR = 4  # tasks: half of 8 CPUs, each of the two roles'
REFUSE = 4.0  # seconds B refuses what it leaves of a room offered back


def test_a_tiny_task_in_the_room_offered_back_does_not_make_the_claim_used() -> None:
    allocator, books, cycle = hog_and_claimant(2, 100)  # A took the idle cluster
    now, killed, flashes = 0.0, 0, 0
    flashed: set[str] = set()  # slaves B filled with tasks that ended at once
    while now < FIRST_WAIT:  # a check and a round a second, as the master's
        cycle.check(now)
        killed += end_kills(cycle, books, now)  # the victims end
        for o in cycle.round(now).offers:
            if o.framework_id == "B":
                flashes += 1
                if o.slave_id in flashed and o.resources.contains(TINY):
                    # the room back: one tiny task that ends at once, the rest refused (an
                    # Accept that launches something: not a whole decline)
                    cycle.launched("B", o.slave_id, TINY)
                    cycle.task_ended("B", f"tiny{flashes}", finished=True, ran=0.0, now=now,
                                     on=(o.slave_id, TINY))  # fmt: skip
                    cycle.decline("B", o.slave_id, o.resources, REFUSE, now)
                    continue
                room, ran = o.resources, 0
                while room.contains(TASK):  # tasks filling the offer: all end at once
                    flashes, ran = flashes + 1, ran + 1
                    room = room - TASK
                    cycle.launched("B", o.slave_id, TASK)
                    cycle.task_ended("B", f"flash{flashes}", finished=True, ran=0.0, now=now,
                                     on=(o.slave_id, TASK))  # fmt: skip
                if ran:
                    flashed.add(o.slave_id)
                allocator.recover("B", o.slave_id, o.resources)
                demand = books.demand["B"][0]
                books.demand["B"] = [(demand[0], max(1, demand[1] - ran))]
                continue
            allocator.recover(o.framework_id, o.slave_id, o.resources)  # A launches again
            room = o.resources
            while room.contains(TASK):
                room = room - TASK
                allocator.allocate_existing("A", o.slave_id, TASK)
                flashes += 1  # (a counter for ids)
                tid = f"again{flashes}"
                books.tasks[("A", tid)] = RunningTask("A", tid, o.slave_id, dict(TASK.millis), now)
        now += 1.0
    running_b = sum(1 for fid, _ in books.tasks if fid == "B")
    assert killed <= FAIR, (
        f"{killed} of A's tasks killed in {FIRST_WAIT:g}s for B, which answered each room "
        f"with tasks that ended at once (and a {TINY} one when it came back) and holds "
        f"{running_b}: its fair share is {FAIR} tasks, freed once"
    )
