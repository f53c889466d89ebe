"""Review 58: a claimant that launches a task of the size freed for it and kills it at
once counted as having used its claim (`ClaimUse.launched` heard launches, never ends),
so it may claim again at once: each claim costs another tenant a task (its work thrown
away) and the claimant ran nothing but a task of no seconds. A tenant that declines the
room waits 60 s, doubling; one that launches and kills waits for nothing."""

from __future__ import annotations

from master.allocation.claim_use import FIRST_WAIT
from master.allocation.planning import RunningTask

from harness.cycle import TASK, hog_and_claimant


def test_a_claimant_that_launches_and_kills_at_once_claims_again_and_again() -> None:
    allocator, books, cycle = hog_and_claimant(2, 2)  # (it declares two again after each)
    now, claims, killed, ran, fresh = 0.0, [], 0, 0, False
    while now < FIRST_WAIT:  # a check and a round a second
        plan = cycle.check(now)
        claims += [now for c in plan.claims if c.claimant == "B"]
        fresh = fresh or any(c.claimant == "B" for c in plan.claims)
        for kill in cycle.kills_due(now):
            books.tasks.pop((kill.framework_id, kill.task_id))
            cycle.task_ended(kill.framework_id, kill.task_id, finished=False, ran=1.0)
            allocator.recover(kill.framework_id, kill.slave_id, TASK)
            killed += 1
        for o in cycle.round(now).offers:
            if o.framework_id == "B":
                # the room freed for it: one task of the size, killed at once; any other
                # offer declined for a while (so that A takes the room back)
                allocator.recover("B", o.slave_id, o.resources, refuse_seconds=30.0, now=now)
                if fresh:
                    cycle.launched("B", o.slave_id, TASK)
                    # ... and killed by B at once: the master tells the cycle it ended
                    on = (o.slave_id, TASK)
                    cycle.task_ended("B", f"b{now}", finished=False, ran=0.0, now=now, on=on)
                    ran, fresh = ran + 1, False
                continue
            allocator.recover(o.framework_id, o.slave_id, o.resources)
            allocator.allocate_existing("A", o.slave_id, TASK)  # A launches in its room
            books.tasks[("A", f"a{now}")] = RunningTask(
                "A", f"a{now}", o.slave_id, dict(TASK.millis), now
            )
        now += 1.0
    assert len(claims) <= 1, (
        f"{len(claims)} claims for B in {FIRST_WAIT:g}s at {claims}: {killed} of A's tasks "
        f"killed for {ran} tasks of B's that it killed as they started"
    )
