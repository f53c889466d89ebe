"""Review 76: a framework's new scheduler process inherits its dead predecessor's
SUPPRESS, and is offered nothing until it happens to revive.

Scenario. Framework A (failover_timeout 30 s) had nothing left to launch and
suppressed its offers, as Mesos and our SDK recommend (`frameworks/job.py`,
`frameworks/samples/command.py` do it). Its process dies; a new one (same code, new
work queued) subscribes with A's framework id, and waits for offers.

What Mesos does. Since 1.9, SUBSCRIBE carries `suppressed_roles` and a (re-)subscription
sets the framework's suppression to exactly those roles (`Master::_subscribe` ->
`updateFramework(framework, info, suppressedRoles)` -> the allocator's
`updateFramework`): a scheduler that subscribes without naming any, pymesos's included,
is offered in every role. drfmesos says it answers Mesos 1.11's API
(docs/reference/mesos-api.md).

What drfmesos does. `Subscriptions._subscribed` re-activates the known framework
(`allocator.activate`) and leaves its `suppressed` flag as the old process left it;
`suppressed_roles` is not read. The new process is offered nothing, for ever: nothing
in its SUBSCRIBED says it is suppressed, and a scheduler that revives only when a task
ends (frameworks/samples/journaled.py) has no task ending to wake it.

Why a user relies on it. Suppression is a scheduler's private, in-memory decision; a
new process that re-registers cannot know its predecessor made it.
"""

from __future__ import annotations

from protocol.wire.messages import Suppress
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.master import GB, Cluster
from harness.master import cluster as cluster


async def test_a_new_scheduler_process_is_not_suppressed_by_its_predecessor(
    cluster: Cluster,
) -> None:
    a = await cluster.framework("A", failover_timeout=30)
    fid = a.framework_id
    await a.bus.publish(a.to_master, Suppress(framework_id=fid))
    await eventually(lambda: cluster.master.allocator.suppressed(fid))

    a2 = await cluster.framework_new_process("A2", fid)  # subscribes naming no suppression
    assert not cluster.master.allocator.suppressed(fid)
    await cluster.slave("s1", Resources(cpus=2, mem=2 * GB))
    offer = await a2.next_offer()
    assert offer.slave_id == "s1"
