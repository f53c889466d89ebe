"""Review 69: a tenant has another's tasks killed again and again by filling every room
preemption frees for it with tasks that end at once, and turning the room down when it
comes back.

`ClaimUse` judges a claim used as soon as the claimant launched tasks of the rooms' size
on each node, and keeps counting a task that finished (`task_ended`: a killed or failed
one is no use; a finished one is). B declares a demand of 100 tasks and holds nothing. A
hold's offer reaches it through its filters; it fills it with tasks that finish at once,
and the claim is judged used. The room is offered to B again (its share 0), and B
declines it for a day: A takes it back. B starves again (share 0, fair share half), and
preemption frees the next rooms for it: A's tasks killed claim after claim, for as long
as B likes, while B runs nothing. The docs promise the opposite ("Else a tenant could
declare demand, decline, and have others' tasks killed every --preemption-timeout seconds
for nothing"). An honest framework with short tasks launches again in the room it is
offered back, and holding its share claims no more.
"""

from __future__ import annotations

from master.allocation.claim_use import FIRST_WAIT

from harness.cycle import TASK, book_running, end_kills, hog_and_claimant

FAIR = 4  # tasks: half of 8 CPUs, each of the two roles'
DAY = 86400.0


def test_second_long_tasks_in_freed_rooms_do_not_kill_anothers_tasks_again_and_again() -> None:
    allocator, books, cycle = hog_and_claimant(2, 100)  # A took the idle cluster
    now, killed, flashes = 0.0, 0, 0
    flashed: set[str] = set()  # slaves B last filled with tasks of a second
    while now < FIRST_WAIT:  # a check and a round a second, as the master's
        cycle.check(now)
        killed += end_kills(cycle, books, now)  # the victims end; A is offered the room back
        for o in cycle.round(now).offers:
            if o.framework_id == "B" and o.slave_id in flashed:  # the room back: turned down
                flashed.discard(o.slave_id)
                cycle.decline("B", o.slave_id, o.resources, DAY, now, whole=True)
                continue
            if o.framework_id == "B":  # tasks of a second filling the offer: all end at once
                flashed.add(o.slave_id)
                room, ran = o.resources, 0
                while room.contains(TASK):
                    flashes, ran = flashes + 1, ran + 1
                    room = room - TASK
                    cycle.launched("B", o.slave_id, TASK)
                    cycle.task_ended("B", f"flash{flashes}", finished=True, ran=1.0, now=now,
                                     on=(o.slave_id, TASK))  # fmt: skip
                allocator.recover("B", o.slave_id, o.resources)
                demand = books.demand["B"][0]
                books.demand["B"] = [(demand[0], demand[1] - ran)]  # (launches count off)
                continue
            allocator.recover(o.framework_id, o.slave_id, o.resources)  # A launches again
            if o.resources.contains(TASK):
                book_running(allocator, books, "A", o.slave_id, f"again{now}", TASK, now)
        now += 1.0
    running_b = sum(1 for fid, _ in books.tasks if fid == "B")
    assert killed <= FAIR, (
        f"{killed} of A's tasks killed in {FIRST_WAIT:g}s for B, which ran {flashes} tasks "
        f"of a second in the rooms freed for it and holds {running_b}: its fair share is "
        f"{FAIR} tasks, freed once"
    )
