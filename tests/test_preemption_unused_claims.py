"""A tenant that declares demand, has others' tasks preempted for it and then declines
the room gains nothing, and must not be able to have them killed again and again: after
a claim it was offered and did not use, preemption waits before freeing room for it
(doubling); a claim it used costs it nothing."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from master.allocation.claim_use import FIRST_WAIT, LONGEST_WAIT, ClaimUse
from master.cycle import claims
from master.master import Master
from protocol.wire.messages import KillTask, Reason, Request, TaskRequest, TaskState
from protocol.wire.resources import Resources

from harness.fakes import FakeFramework, FakeSlave
from harness.helpers import eventually
from harness.master import FAST, GB, Cluster

TASK = Resources(cpus=1, mem=GB)
NODE = Resources(cpus=2, mem=2 * GB)
PREEMPTING = dataclasses.replace(FAST, preemption_timeout=0.2, preemption_notice=0.2)
NEED = {"s1": {"cpus": 1000}}


def test_a_claim_offered_and_left_unused_makes_its_claimant_wait_doubling() -> None:
    use = ClaimUse()
    waits = []
    now = 0.0
    for _ in range(8):
        assert use.may_claim("late", now)
        use.claimed("late", now + 10, NEED, 1)
        assert not use.may_claim("late", now + 5)  # (its room is held for it)
        use.offered("late", "s1", {"cpus": 2000})
        now += 10
        assert not use.may_claim("late", now)
        waits.append(use.waiting("late", now))
        now += waits[-1]
    assert waits == [min(LONGEST_WAIT, FIRST_WAIT * 2**i) for i in range(8)]
    assert use.unused("late") == 8


@given(
    holds=st.lists(st.floats(0.1, 100), min_size=1, max_size=30),
    gaps=st.lists(st.floats(0, 500), min_size=30, max_size=30),
    used=st.lists(st.booleans(), min_size=30, max_size=30),
)
def test_unused_claims_space_out_and_used_ones_never_wait(
    holds: list[float], gaps: list[float], used: list[bool]
) -> None:
    """Whatever the holds and the gaps between attempts: a claim is allowed right after
    a used one, and after k unused ones in a row not before the doubling wait is over."""
    use = ClaimUse()
    now, unused_in_a_row, judged_at = 0.0, 0, 0.0
    for hold, gap, uses in zip(holds, gaps, used, strict=False):
        allowed = use.may_claim("late", now)
        wait = min(LONGEST_WAIT, FIRST_WAIT * 2 ** (unused_in_a_row - 1)) if unused_in_a_row else 0
        assert allowed == (now >= judged_at + wait)
        if not allowed:
            now = judged_at + wait + gap
            continue
        use.claimed("late", now + hold, NEED, 1)
        use.offered("late", "s1", NEED["s1"])
        if uses:
            use.launched("late", "s1", NEED["s1"])
            assert use.may_claim("late", now)  # judged at once
            unused_in_a_row, judged_at = 0, now
        else:
            assert not use.may_claim("late", now + hold * 0.99)
            now += hold + gap
            judged_at, unused_in_a_row = now, unused_in_a_row + 1
            assert not use.may_claim("late", now)  # (judged here: the wait begins)
        assert use.unused("late") == unused_in_a_row


def test_a_claim_used_clears_the_count_and_is_judged_at_once() -> None:
    use = ClaimUse()
    use.claimed("late", 10, NEED, 1)
    use.offered("late", "s1", {"cpus": 1000})
    assert not use.may_claim("late", 10)  # unused once: waits
    use.claimed("late", 80, NEED, 1)
    use.offered("late", "s1", {"cpus": 1000})
    use.launched("late", "s1", {"cpus": 500})  # (less than the room was freed for)
    assert not use.may_claim("late", 75)
    use.launched("late", "s1", {"cpus": 500, "mem": 10})
    assert use.may_claim("late", 75)  # used: no need to wait for the hold's end
    assert use.unused("late") == 0
    assert use.waiting("late", 75) == 0


@pytest.mark.parametrize(
    ("offer", "slave"), [({"cpus": 500}, "s1"), ({"cpus": 1000}, "s2")], ids=["small", "elsewhere"]
)
def test_a_claim_whose_room_never_reached_its_claimant_counts_neither_way(
    offer: dict[str, int], slave: str
) -> None:
    use = ClaimUse()
    use.claimed("late", 10, NEED, 1)
    use.offered("late", slave, offer)
    use.launched("late", slave, offer)
    assert use.may_claim("late", 10)
    assert use.unused("late") == 0


def test_a_framework_forgotten_leaves_nothing_behind() -> None:
    use = ClaimUse()
    use.claimed("late", 10, NEED, 1)
    use.offered("late", "s1", {"cpus": 1000})
    assert not use.may_claim("late", 10)
    use.forget("late")
    assert use.may_claim("late", 10)
    assert not use.watching


async def fill(c: Cluster, fw: FakeFramework, slave_id: str) -> FakeSlave:
    after = fw.offer_count()
    slave = await c.slave(slave_id, NODE)
    offer = await fw.next_offer(after=after)
    await fw.accept(offer, [fw.task(offer, TASK, f"{slave_id}-{i}") for i in range(2)], refuse=0)
    await slave.run_task()
    await slave.run_task()
    return slave


def preempted(slave: FakeSlave) -> list[KillTask]:
    return [k for k in slave.inbox.of(KillTask) if k.reason == Reason.TASK_PREEMPTED]


async def first_preemption(
    monkeypatch: pytest.MonkeyPatch, stack: contextlib.AsyncExitStack
) -> tuple[Master, FakeFramework, FakeSlave]:
    """hog fills s1; late declares two tasks and starves; one of hog's tasks is
    preempted for it and ends; late is offered the room. (The room is held 0.5 s past
    the kill, not 10: the judge comes when the hold is over.)"""
    monkeypatch.setattr(claims, "HOLD_EXTRA", 0.5)
    c = Cluster(stack)
    master = await c.start_master(PREEMPTING)
    hog = await c.framework("hog")
    s1 = await fill(c, hog, "s1")
    late = await c.framework("late")
    wants = Request(framework_id=late.framework_id, requests=[TaskRequest(resources=TASK, count=2)])
    await late.bus.publish(late.to_master, wants)
    await eventually(lambda: bool(preempted(s1)), timeout=10)
    (kill,) = preempted(s1)
    await s1.report(kill.framework_id, kill.task_id, TaskState.KILLED)
    return master, late, s1


async def starved_past_a_claim(master: Master, framework_id: str) -> None:
    """Until `framework_id` has starved long past what makes a claim (its hold over)."""
    loop = asyncio.get_running_loop()
    preemption = master.preemptor.preemption
    timeout = PREEMPTING.preemption_timeout or 0.0

    def overdue() -> bool:
        since = preemption.starving_since.get(framework_id)
        return since is not None and loop.time() - since > timeout + 1.0

    await eventually(overdue, timeout=10)


async def test_a_tenant_that_declines_the_room_preempted_for_it_has_no_more_killed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        master, late, s1 = await first_preemption(monkeypatch, stack)
        offer = await late.next_offer(timeout=10)
        assert offer.slave_id == "s1"
        await late.decline(offer, refuse=0.1)  # (and hog takes the room back)
        await starved_past_a_claim(master, late.framework_id)
        assert len(preempted(s1)) == 1, "hog's tasks killed again for a tenant that declines"
        use = master.preemptor.preemption.claim_use
        assert use.unused(late.framework_id) == 1
        assert 0 < use.waiting(late.framework_id, asyncio.get_running_loop().time()) <= FIRST_WAIT


async def test_a_tenant_that_runs_a_task_in_the_room_preempted_for_it_may_claim_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        master, late, s1 = await first_preemption(monkeypatch, stack)
        offer = await late.next_offer(timeout=10)
        await late.accept(offer, [late.task(offer, TASK, "late-0")], refuse=0)
        await s1.run_task()
        use = master.preemptor.preemption.claim_use
        now = asyncio.get_running_loop().time
        assert use.may_claim(late.framework_id, now())  # (before its hold is over)
        assert use.unused(late.framework_id) == 0


async def test_why_tells_a_tenant_that_declined_its_room_how_long_preemption_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        master, late, _ = await first_preemption(monkeypatch, stack)
        await late.decline(await late.next_offer(timeout=10), refuse=0.1)
        await starved_past_a_claim(master, late.framework_id)
        reasons, _ = master.preemptor.cycle.why(
            late.framework_id, asyncio.get_running_loop().time()
        )
        first = reasons[0]
        assert "preemption frees no room for it" in first.message
        assert 0 < float(first.numbers["preemption_wait"]) <= FIRST_WAIT  # type: ignore[arg-type]
        assert first.numbers["claims_unused"] == 1
