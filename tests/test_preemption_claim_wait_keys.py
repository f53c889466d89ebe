"""The wait preemption imposes for leaving claims unused (`ClaimUse`) is kept for each
claimant's principal and for each of its roles: a tenant of one role that subscribes its
frameworks under three principals claims no more often than one that runs them under
one (the wait was the principal's alone, and three principals had three waits), and a
framework under a new principal in a waiting role waits too.

On the offer cycle with the books in memory, a check and a round a second: `hog` fills
two slaves; three frameworks of role `m` each declare 4 tasks and decline every room
freed for them (the hog takes it back)."""

from __future__ import annotations

import pytest

from master.allocation.allocator import Allocator
from master.allocation.claim_use import FIRST_WAIT, ClaimUse
from master.allocation.planning import RunningTask
from master.allocation.preemption import Doomed, PreemptionConfig
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books

TASK = Resources(cpus=1, mem=1024)
SLAVE = Resources(cpus=4, mem=4096)
CLAIMANTS = ("m1", "m2", "m3")
WINDOW = 400.0


def killed_for(principals: dict[str, str]) -> int:
    """Tasks of the hog's killed in WINDOW for claimants under `principals`, which never
    use the room freed for them."""
    config = CycleConfig(preemption=PreemptionConfig(timeout=2.0, notice=1.0, threshold=1.0))
    a, books = Allocator("drf"), Books()
    a.add_framework("hog", "h")
    books.roles["hog"], books.tenants["hog"] = "h", "hog"
    for name in CLAIMANTS:
        a.add_framework(name, "m")
        books.roles[name], books.tenants[name] = "m", principals[name]
        books.demand[name] = [(dict(TASK.millis), 4)]
    for i in range(2):
        a.add_slave(f"s{i}", SLAVE)
    cycle = OfferCycle(a, books, config)
    n = killed = 0
    for now in range(int(WINDOW)):
        t = float(now)
        cycle.check(t)
        for kill in cycle.kills_due(t):
            task = books.tasks.pop((kill.framework_id, kill.task_id))
            cycle.task_ended(kill.framework_id, kill.task_id, finished=False, ran=1.0, now=t)
            a.recover(kill.framework_id, task.slave_id, TASK)
            killed += 1
        for o in cycle.round(t).offers:
            if o.framework_id != "hog":  # (a claimant: the room turned down)
                cycle.decline(o.framework_id, o.slave_id, o.resources, 5.0, t, whole=True)
                continue
            rest = o.resources
            while rest.contains(TASK):
                n, rest = n + 1, rest - TASK
                books.tasks[("hog", f"t{n}")] = RunningTask(
                    "hog", f"t{n}", o.slave_id, dict(TASK.millis), t
                )
            if rest:
                cycle.decline("hog", o.slave_id, rest, 5.0, t)
    return killed


def test_a_tenant_of_one_role_claims_no_more_often_under_three_principals_than_under_one() -> None:
    one = killed_for(dict.fromkeys(CLAIMANTS, "mallory"))
    three = killed_for({name: f"mallory-{i}" for i, name in enumerate(CLAIMANTS)})
    assert one > 0
    assert three <= one, (
        f"role m's frameworks had {three} of the hog's tasks killed in {WINDOW:.0f} s under "
        f"three principals, {one} under one: each principal waited on its own"
    )


@pytest.mark.parametrize("principal", ["mallory", "trudy"])
def test_a_claimant_waits_while_its_principal_or_its_role_waits(principal: str) -> None:
    use = ClaimUse()
    use.claimed("m1", 10.0, {"s1": dict(TASK.millis)}, 1, "mallory", roles=("m",))
    use.offered("m1", "s1", dict(SLAVE.millis))
    assert not use.may_claim("m1", 10.0, "mallory", roles=("m",))  # (judged: unused)
    # another framework of the same principal in another role, or of another principal
    # in the same role, waits as well
    role = "other" if principal == "mallory" else "m"
    assert not use.may_claim("m2", 11.0, principal, roles=(role,))
    assert use.may_claim("m2", 10.0 + FIRST_WAIT, principal, roles=(role,))
    assert use.may_claim("x", 11.0, "alice", roles=("other",))  # (neither: no wait)


def test_a_claimants_task_preempted_for_another_claim_is_no_room_left_unused() -> None:
    """c1's claim freed room on s1 and c1 ran its task there; before the claim was judged
    the task was taken for c2's claim. c1 used the room: its task's end was preemption's
    doing, not its own (the property test's case: c1 then waited 60 s below its share)."""
    cycle = OfferCycle(Allocator("drf"), Books(), CycleConfig(preemption=PreemptionConfig(1.0)))
    use = cycle.preemption.claim_use
    use.claimed("c1", 10.0, {"s1": dict(TASK.millis)}, 1)
    use.offered("c1", "s1", dict(TASK.millis))
    use.launched("c1", "s1", dict(TASK.millis))
    cycle.preemption.doomed[("c1", "t1")] = Doomed("c2", "s1", 5.0)
    cycle.task_ended("c1", "t1", finished=False, ran=3.0, now=6.0, on=("s1", TASK))
    assert use.may_claim("c1", 10.0)
    assert use.unused("c1") == 0
