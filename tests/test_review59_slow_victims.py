"""Review 59: a claimant whose victims take their kill grace (a service's 30 s, under the
slave's 60 s --max-kill-grace) is never counted for the room it leaves unused: the hold
(notice + 10 s + two rounds, 14 s here) lapses before the victims end, and `ClaimUse`
counts a claim whose victims outlived the hold "neither way". The claimant declines the
room with a long filter once it is free (it was held for nobody by then), the victim
takes it back, and the claimant starves again: its tenant never waits, and the victim
loses a task every starvation timeout plus a grace, for a framework that ran nothing."""

from __future__ import annotations

from master.allocation.allocator import Allocator
from master.allocation.planning import RunningTask
from master.allocation.preemption import PreemptionConfig
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books

TASK = Resources(cpus=1, mem=1024)
SLAVE = Resources(cpus=4, mem=4096)
GRACE = 30.0  # the victims' kill policy's grace: a service's, within --max-kill-grace
WINDOW = 600.0  # seconds watched


def test_a_claimant_whose_victims_take_their_grace_never_waits_for_unused_claims() -> None:
    config = CycleConfig(preemption=PreemptionConfig(timeout=5.0, notice=2.0))
    allocator, books = Allocator("drf"), Books()
    for name in ("A", "B"):
        allocator.add_framework(name, name)
        books.roles[name] = name
    for i in range(2):
        allocator.add_slave(f"s{i}", SLAVE)
    cycle = OfferCycle(allocator, books, config)
    for i in range(8):  # A (honest) fills both slaves
        slave = f"s{i % 2}"
        allocator.allocate_existing("A", slave, TASK)
        books.tasks[("A", f"t{i}")] = RunningTask("A", f"t{i}", slave, dict(TASK.millis), i)
    books.demand["B"] = [(dict(TASK.millis), 2)]  # B declares demand, never launches
    now, claims, killed = 0.0, [], 0
    ending: dict[tuple[str, str], tuple[float, str]] = {}  # victim: when it ends, where
    while now < WINDOW:  # a check and a round a second, as the master's
        plan = cycle.check(now)
        claims += [now for c in plan.claims if c.claimant == "B"]
        for kill in cycle.kills_due(now):  # SIGTERM now; the task ends after its grace
            ending[(kill.framework_id, kill.task_id)] = (now + GRACE, kill.slave_id)
        for key, (at, slave) in list(ending.items()):
            if at <= now:
                del ending[key]
                books.tasks.pop(key)
                cycle.task_ended(*key, finished=False, ran=100.0, now=now)
                allocator.recover(key[0], slave, TASK)
                killed += 1
        for o in cycle.round(now).offers:
            if o.framework_id == "B":  # declined, not to be offered that slave for long
                cycle.decline("B", o.slave_id, o.resources, 3600.0, now, whole=True)
                continue
            allocator.recover(o.framework_id, o.slave_id, o.resources)  # A launches again
            for n in range(int(o.resources.quantities().get("cpus", 0))):
                allocator.allocate_existing("A", o.slave_id, TASK)
                books.tasks[("A", f"r{now}-{n}")] = RunningTask(
                    "A", f"r{now}-{n}", o.slave_id, dict(TASK.millis), now
                )
        now += 1.0
    # a tenant that leaves claims unused waits 60 s, 120 s, 240 s...: after its victims
    # end, at most 4 claims fit in 600 s
    assert len(claims) <= 4, (
        f"{len(claims)} claims for B in {WINDOW:g}s at {claims} ({killed} of A's tasks "
        f"killed): B never launched a task and declined every room freed for it"
    )
