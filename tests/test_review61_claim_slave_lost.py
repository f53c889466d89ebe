"""Review 61 (on e5e0cc1): an honest claimant whose claim freed rooms on three nodes, one
of which is then lost (a partition, healed later), is judged to have left its claim
unused, and waits 60 s.

Since e5e0cc1 a claim is used only if *every* node of the claim holds a task of its
size (`ClaimUse._Claimed.used`: `all(...)` over `needs`). A node removed after the claim
(its heartbeats stop: its tasks, the victims among them, are UNREACHABLE and end) stays
among the claim's needs: its room can never be taken, so the claim can never be used.
The claimant below takes every room left at once and keeps its tasks running; once the
slave is back with the tasks it ran (the partition healed), the claimant starves again
(4 of 12 cpus, under 0.8 of its fair half), and when it may claim its claim is judged
unused: FIRST_WAIT, 60 s, before preemption frees room for it again, for the loss of a
slave. (The claimant never was offered, nor could take, the room on the lost node.)

On the offer cycle with the books in memory (as tests/test_review59_slow_victims.py), a
check and a round a second; the slave's removal as the master's (the allocator loses
it, its tasks end and are told to the cycle)."""

from __future__ import annotations

from master.allocation.allocator import Allocator
from master.allocation.planning import RunningTask
from master.allocation.preemption import PreemptionConfig
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books, book_running

TASK = Resources(cpus=1, mem=1024)
SLAVE = Resources(cpus=4, mem=4096)
DEMAND = 6
WINDOW = 90.0
BACK = 30.0  # s1 is back then


def test_a_claim_is_not_unused_for_a_room_on_a_slave_since_lost() -> None:
    config = CycleConfig(preemption=PreemptionConfig(timeout=5.0, notice=2.0, threshold=0.8))
    allocator, books = Allocator("drf"), Books()
    for name in ("A", "B"):
        allocator.add_framework(name, name)
        books.roles[name] = name
    for i in range(3):
        allocator.add_slave(f"s{i}", SLAVE)
    cycle = OfferCycle(allocator, books, config)
    use = cycle.preemption.claim_use
    for i in range(12):  # A fills the three slaves
        slave = f"s{i % 3}"
        book_running(allocator, books, "A", slave, f"t{i}", TASK, i)
    books.demand["B"] = [(dict(TASK.millis), DEMAND)]
    now, claims, b_tasks, unused_seen, lost = 0.0, [], 0, 0, False
    lost_tasks: dict[tuple[str, str], RunningTask] = {}
    while now < WINDOW:
        plan = cycle.check(now)
        for c in plan.claims:
            if c.claimant == "B":
                claims.append((now, sorted({p.slave_id for p in c.plans})))
        unused_seen = max(unused_seen, use.unused("B"))
        if claims and not lost:  # s1 is lost (no heartbeat) just after the first claim
            lost = True
            allocator.remove_slave("s1")
            cycle.slave_removed("s1")  # (as the master's removals tell it)
            for key in [k for k, t in books.tasks.items() if t.slave_id == "s1"]:
                lost_tasks[key] = books.tasks.pop(
                    key
                )  # UNREACHABLE: ended, as the master tells the cycle
                cycle.task_ended(*key, finished=False, ran=10.0, now=now, on=("s1", TASK))
        if now == BACK:  # s1 is back (a partition healed), A's tasks on it running
            allocator.add_slave("s1", SLAVE)
            for key, task in lost_tasks.items():
                allocator.allocate_existing("A", "s1", TASK)
                books.tasks[key] = task
        for kill in cycle.kills_due(now):  # A's tasks on s0 end as they are killed
            books.tasks.pop((kill.framework_id, kill.task_id))
            cycle.task_ended(kill.framework_id, kill.task_id, finished=False, ran=10.0, now=now)
            allocator.recover(kill.framework_id, kill.slave_id, TASK)
        for o in cycle.round(now).offers:
            if o.framework_id == "B":  # honest: a task in every room, as long as it wants
                left = o.resources
                while b_tasks < DEMAND and left.contains(TASK):
                    task_id = f"b{b_tasks}"
                    books.tasks[("B", task_id)] = RunningTask(
                        "B", task_id, o.slave_id, dict(TASK.millis), now
                    )
                    allocator.allocate_existing("B", o.slave_id, TASK)
                    cycle.launched("B", o.slave_id, TASK)
                    left, b_tasks = left - TASK, b_tasks + 1
                allocator.recover("B", o.slave_id, o.resources)
                books.demand["B"] = [(dict(TASK.millis), DEMAND - b_tasks)]
                continue
            allocator.recover(o.framework_id, o.slave_id, o.resources)  # A declines
        now += 1.0
    assert claims, "the setting: a claim"
    assert claims[0][1] == ["s0", "s1", "s2"], f"the setting: a claim on all three {claims}"
    assert b_tasks >= 4, "the setting: B took the rooms on s0 and s2 (and more, unwaited)"
    starving = cycle.preemption.starving_since.get("B")
    assert unused_seen == 0, (
        f"B took every room of its claim {claims[0]} still there ({b_tasks} tasks "
        f"running); s1 was lost just after the claim and back at {BACK:g}s. Its claim was "
        f"judged unused ({unused_seen}): starving since {starving}, its claims in "
        f"{WINDOW:g}s {claims}, and it waits {use.waiting('B', now):g}s more, for the "
        f"loss of a slave"
    )
