"""Review 84: an UpdateFramework awaits its registry write inside its handler, and the
master's intake serves every principal's calls from one server that awaits each handler:
while a tenant's update is on its way to ZooKeeper, no other principal's call is read.
A tenant that renames its framework at its rate limit (each a new record, each written)
holds everybody's calls for a ZooKeeper round trip each time (review 54 took the
new-framework Subscribe's write off the intake for the same reason)."""

from __future__ import annotations

import contextlib

from test_registry_write_stall import HeldStore

from master.ha.registry import Registry
from protocol.wire.messages import Reconcile, ReconcileTask, Update, UpdateFramework
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.master import GB, Cluster


async def test_an_update_waiting_on_the_registry_holds_up_no_other_principals_call() -> None:
    store = HeldStore()
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        await c.start_master(registry=Registry(store))
        mallory = await c.framework("M", principal="mallory")
        bob = await c.framework("B", principal="bob")
        await c.slave("s1", Resources(cpus=2, mem=2 * GB))

        store.holding = True  # the registry is slow to write for a while
        stack.callback(store.release.set)
        rename = UpdateFramework(framework_id=mallory.framework_id, name="M2")
        await mallory.bus.publish(mallory.to_master, rename)
        await eventually(lambda: store.waiting == 1)
        # bob asks after a task: an answer needs nothing of the registry
        ask = Reconcile(framework_id=bob.framework_id, tasks=[ReconcileTask(task_id="t9")])
        await bob.bus.publish(bob.to_master, ask)
        await bob.inbox.wait_for(Update, lambda u: u.status.task_id == "t9", timeout=5)
