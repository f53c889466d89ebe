"""Review 58: the wait preemption imposes on a claimant that left the room freed for it
unused (`ClaimUse`: 60 s, doubling to an hour) is kept by framework id, and a framework
is a tenant's to make at will: the tenant whose claim was judged unused subscribes
another framework under the same principal, declares the same demand, and has another
of the victim's tasks killed after one starvation timeout -- no wait at all. Each new id
starts with a clean record.

In process, on the memory transport (the fixtures of
tests/test_preemption_unused_claims.py)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses

import pytest

from master.cycle import claims
from protocol.wire.messages import KillTask, Reason, Request, TaskRequest, TaskState
from protocol.wire.resources import Resources

from harness.fakes import FakeFramework, FakeSlave
from harness.helpers import eventually
from harness.master import FAST, GB, Cluster

TASK = Resources(cpus=1, mem=GB)
NODE = Resources(cpus=2, mem=2 * GB)
PREEMPTING = dataclasses.replace(FAST, preemption_timeout=0.2, preemption_notice=0.2)


def preempted(slave: FakeSlave) -> list[KillTask]:
    return [k for k in slave.inbox.of(KillTask) if k.reason == Reason.TASK_PREEMPTED]


async def wants(fw: FakeFramework, count: int) -> None:
    request = TaskRequest(resources=TASK, count=count)
    await fw.bus.publish(fw.to_master, Request(framework_id=fw.framework_id, requests=[request]))


async def test_a_tenant_waiting_for_an_unused_claim_claims_again_under_a_new_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(claims, "HOLD_EXTRA", 0.5)
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        master = await c.start_master(PREEMPTING)
        hog = await c.framework("hog", principal="hog")
        s1 = await c.slave("s1", NODE)
        offer = await hog.next_offer()
        await hog.accept(offer, [hog.task(offer, TASK, f"h{i}") for i in range(2)], refuse=0)
        await s1.run_task()
        await s1.run_task()

        late = await c.framework("late", principal="mallory")
        await wants(late, 2)
        await eventually(lambda: bool(preempted(s1)), timeout=10)
        (kill,) = preempted(s1)
        await s1.report(kill.framework_id, kill.task_id, TaskState.KILLED)
        room = await late.next_offer(timeout=10)
        await late.decline(room, refuse=0.1)  # (and hog takes the room back)
        use = master.preemptor.preemption.claim_use
        await eventually(lambda: use.unused(late.framework_id) == 1, timeout=10)
        now = asyncio.get_running_loop().time
        assert use.waiting(late.framework_id, now()) > 0  # (judged unused: it waits)

        # the same tenant, another framework id, the same demand
        again = await c.framework("late-again", principal="mallory")
        await wants(again, 2)
        preemption = master.preemptor.preemption
        timeout = PREEMPTING.preemption_timeout or 0.0

        def starved_long() -> bool:  # (past what makes a claim, with no claim made)
            since = preemption.starving_since.get(again.framework_id)
            return since is not None and now() - since > timeout + 1.0

        await eventually(lambda: len(preempted(s1)) > 1 or starved_long(), timeout=10)
        assert len(preempted(s1)) == 1, (
            f"mallory's new framework {again.framework_id} had hog's task killed while "
            f"her first waits {use.waiting(late.framework_id, now()):.0f}s for leaving "
            "the room preempted for it unused"
        )
