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

from master.allocation.allocator import Allocator
from master.allocation.planning import RunningTask
from master.allocation.preemption import PreemptionConfig
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books

TASK = Resources(cpus=1, mem=1024)
SLAVE = Resources(cpus=4, mem=4096)
RUNS = 20.0  # seconds each of the claimant's tasks runs, then finishes
WINDOW = 600.0


def test_a_claim_of_several_rooms_on_one_node_is_not_used_by_one_task_there() -> None:
    config = CycleConfig(preemption=PreemptionConfig(timeout=5.0, notice=2.0))
    allocator, books = Allocator("drf"), Books()
    for name in ("A", "B"):
        allocator.add_framework(name, name)
        books.roles[name] = name
    for i in range(4):
        allocator.add_slave(f"s{i}", SLAVE)
    cycle = OfferCycle(allocator, books, config)
    for i in range(16):  # A (honest) fills the four slaves
        slave = f"s{i % 4}"
        allocator.allocate_existing("A", slave, TASK)
        books.tasks[("A", f"t{i}")] = RunningTask("A", f"t{i}", slave, dict(TASK.millis), i)
    books.demand["B"] = [(dict(TASK.millis), 8)]
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
        for kill in cycle.kills_due(now):
            books.tasks.pop((kill.framework_id, kill.task_id))
            cycle.task_ended(kill.framework_id, kill.task_id, finished=False, ran=100.0, now=now)
            allocator.recover(kill.framework_id, kill.slave_id, TASK)
            killed += 1
        for task_id, (at, slave) in list(ending.items()):
            if at <= now:
                del ending[task_id]
                books.tasks.pop(("B", task_id))
                cycle.task_ended("B", task_id, finished=True, ran=RUNS, now=now, on=(slave, TASK))
                allocator.recover("B", slave, TASK)
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
            allocator.recover(o.framework_id, o.slave_id, o.resources)  # A launches again
            for n in range(int(o.resources.quantities().get("cpus", 0))):
                allocator.allocate_existing("A", o.slave_id, TASK)
                books.tasks[("A", f"r{now}-{n}")] = RunningTask(
                    "A", f"r{now}-{n}", o.slave_id, dict(TASK.millis), now
                )
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
