"""A framework's Subscribe waits for the registry, and so does everybody else (review 54).

A Subscribe is written to the registry (ZooKeeper, or a lone master's journal) before it
is answered. The master's intake serves every principal's calls from one server that
awaits each handler (master.intake.queues), and the Subscribe's handler awaits that
write: while it is on its way, no other principal's call is read -- a slave's heartbeat,
another tenant's launch, an operator's call. A slave's Register does not hold the intake
so (its write goes on in the background: "the calls after it are read meanwhile"). A
ZooKeeper that syncs slowly (a busy disk), or one losing its quorum, makes each
Subscribe a stall of the whole master as long as the write takes; any tenant may
subscribe.

In process, on the memory transport, with a registry whose framework writes the test
holds and releases."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from master.ha.registry import MemoryStore, Registry
from protocol.wire.messages import Reconcile, ReconcileTask, TaskState, Update
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.master import GB, Cluster


class HeldStore(MemoryStore):
    """A registry store whose framework records wait for `release` while `holding`."""

    def __init__(self) -> None:
        super().__init__()
        self.holding, self.release, self.waiting = False, asyncio.Event(), 0

    async def put(self, key: str, value: Any) -> None:
        if self.holding and key.startswith("framework/"):
            self.waiting += 1
            await self.release.wait()
        await super().put(key, value)


async def test_a_subscription_waiting_on_the_registry_holds_up_no_other_principals_call() -> None:
    store = HeldStore()
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        await c.start_master(registry=Registry(store))
        bob = await c.framework("B")
        await c.slave("s1", Resources(cpus=2, mem=2 * GB))

        store.holding = True  # the registry is slow to write for a while
        stack.callback(store.release.set)
        mallory = asyncio.create_task(c.framework("M"))  # a tenant subscribes
        await eventually(lambda: store.waiting == 1)
        # bob asks after a task: an answer needs nothing of the registry
        ask = Reconcile(framework_id=bob.framework_id, tasks=[ReconcileTask(task_id="t9")])
        await bob.bus.publish(bob.to_master, ask)
        await bob.inbox.wait_for(Update, lambda u: u.status.task_id == "t9", timeout=5)
        assert bob.inbox.of(Update)[0].status.state in (TaskState.LOST, TaskState.UNKNOWN)
        assert not mallory.done()  # (its write is still on its way)
        store.release.set()
        await mallory
