"""Review 59: a claim that freed room on several nodes counts as used when the claimant
runs one task on one of them (`ClaimUse._Claimed.used`: "a node of the claim has a task
of the size its room was freed for"). A tenant that declares 8 tasks has preemption free
room for up to 8 of them at once (a plan a node, `max_tasks` its declared count); it runs
one 20 s task in that room, declines the rest with a long filter (the victim takes it
back), and starves again: each claim is judged used and clears its count, so it never
waits, and the victim loses some 6 tasks for each task of the claimant's.

On the offer cycle with the books in memory (the harness of
tests/test_review58_suppressed_claimant.py), a check and a round a second. The same
cluster with a claimant that runs a task in every room freed for it: 1 claim, 8 tasks
killed, 240 tasks of its own run in 600 s."""

from __future__ import annotations

from master.allocation.planning import RunningTask

from harness.cycle import TASK, claimant_finishes, end_kills, hog_and_claimant, hog_fills

RUNS = 20.0  # seconds each of the claimant's tasks runs, then finishes
WINDOW = 600.0


def test_a_claim_whose_rooms_are_all_but_one_left_unused_counts_as_unused() -> None:
    allocator, books, cycle = hog_and_claimant(4, 8)  # A (honest) fills the four slaves
    now, claims, killed, ran = 0.0, 0, 0, 0
    ending: dict[str, tuple[float, str]] = {}  # B's tasks: when they finish, where
    one_run = False  # B ran its one task since its last claim
    while now < WINDOW:
        plan = cycle.check(now)
        if any(c.claimant == "B" for c in plan.claims):
            claims, one_run = claims + 1, False
        killed += end_kills(cycle, books, now)
        claimant_finishes(cycle, books, ending, now, RUNS)
        for o in cycle.round(now).offers:
            if o.framework_id == "B":
                if o.resources.contains(TASK) and not one_run:  # one task, the rest back
                    allocator.recover("B", o.slave_id, o.resources - TASK)
                    task_id = f"b{now:g}"
                    books.tasks[("B", task_id)] = RunningTask(
                        "B", task_id, o.slave_id, dict(TASK.millis), now
                    )
                    cycle.launched("B", o.slave_id, TASK)
                    ending[task_id] = (now + RUNS, o.slave_id)
                    one_run, ran = True, ran + 1
                else:
                    allocator.recover("B", o.slave_id, o.resources, refuse_seconds=3600.0, now=now)
                continue
            hog_fills(cycle, books, o, now)  # A launches again
        now += 1.0
    # the room freed and left unused is bounded by the waits (60 s, 120 s, 240 s...): at
    # most 4 claims of 8 rooms in 600 s, were each such claim counted unused
    assert killed - ran <= 4 * 8, (
        f"{claims} claims for B in {WINDOW:g}s killed {killed} of A's tasks; B ran {ran} "
        f"task(s) of {RUNS:g}s in the room freed for it, one a claim: {killed - ran} of A's "
        f"tasks killed for room B left unused, and B never waited"
    )
