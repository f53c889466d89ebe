"""Review 61 (on e5e0cc1): "every room" is every *node*: a claim that freed 4 rooms on one
node is used by one task there.

e5e0cc1 made a claim used only if every room it freed holds a task of its size (review
59: a claim of 8 rooms judged used for one task). But the claim's needs are kept a node
each (`Preemption.check`: `needs.setdefault(plan.slave_id, plan.task)`): the rooms of
several plans on one node are one need of one task. A tenant that declares 8 tasks, runs
one 20 s task on each node of a claim and declines the rest with a long filter has every
claim judged used, those that freed two rooms or more on a node too: it never waits, and
the victim loses tasks for rooms left empty, claim after claim.

On the offer cycle with the books in memory (as tests/test_review59_claim_one_of_many.py),
a check and a round a second."""

from __future__ import annotations

from master.allocation.planning import RunningTask

from harness.cycle import TASK, claimant_finishes, end_kills, hog_and_claimant, hog_fills

RUNS = 20.0  # seconds each of the claimant's tasks runs, then finishes
WINDOW = 600.0


def test_a_claim_of_several_rooms_on_one_node_is_not_used_by_one_task_there() -> None:
    allocator, books, cycle = hog_and_claimant(4, 8)  # A (honest) fills the four slaves
    now, claims, rooms, killed, ran, shared = 0.0, 0, 0, 0, 0, 0
    ending: dict[str, tuple[float, str]] = {}  # B's tasks: when they finish, where
    tried: set[str] = set()  # the nodes B ran its one task on since its last claim
    while now < WINDOW:
        plan = cycle.check(now)
        for c in plan.claims:
            if c.claimant == "B":
                claims, rooms, tried = claims + 1, rooms + len(c.plans), set()
                nodes = {p.slave_id for p in c.plans}
                shared += len(c.plans) > len(nodes)  # rooms on one node: one task there
        killed += end_kills(cycle, books, now, ran=100.0)
        claimant_finishes(cycle, books, ending, now, RUNS)
        for o in cycle.round(now).offers:
            if o.framework_id == "B":  # one task a node of the claim, the rest back
                if o.resources.contains(TASK) and o.slave_id not in tried:
                    tried.add(o.slave_id)
                    allocator.recover("B", o.slave_id, o.resources - TASK)
                    task_id = f"b{now:g}-{o.slave_id}"
                    books.tasks[("B", task_id)] = RunningTask(
                        "B", task_id, o.slave_id, dict(TASK.millis), now
                    )
                    cycle.launched("B", o.slave_id, TASK)
                    ending[task_id] = (now + RUNS, o.slave_id)
                    ran += 1
                else:
                    allocator.recover("B", o.slave_id, o.resources, refuse_seconds=3600.0, now=now)
                continue
            hog_fills(cycle, books, o, now)  # A launches again
        now += 1.0
    unused = cycle.preemption.claim_use.unused("B")
    # were a claim with rooms left empty counted unused, the waits (60 s, 120 s, 240 s...)
    # would allow at most 4 such claims in 600 s
    assert shared <= 4, (
        f"{claims} claims for B in {WINDOW:g}s freed {rooms} rooms and killed {killed} of "
        f"A's tasks (100 s of work each); {shared} of them freed several rooms on one node, "
        f"where B ran one task: B ran {ran} tasks of {RUNS:g}s, {killed - ran} of A's tasks "
        f"killed for rooms B left empty, every claim judged used (unused in a row: "
        f"{unused}), B never waited"
    )
