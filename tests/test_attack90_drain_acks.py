"""Attack 90: a tenant that never acknowledges its tasks' updates held an operator's drain
DRAINING for as long as it liked (forever: the master waited for every framework's
acknowledgement of every update from the slave, as Mesos does, with no bound), so the
slave could not be marked DRAINED, nor gone, nor reactivated, however long ago its last
task ended. In process over the memory transport, with fake slaves and frameworks."""

from __future__ import annotations

import contextlib
import dataclasses

from master.books import DRAINED, DRAINING
from protocol.wire.messages import DrainSlave, KillTask, ReactivateSlave, TaskState
from protocol.wire.resources import Resources

from harness.drain import SMALL, operator
from harness.helpers import eventually
from harness.master import FAST, GB, Cluster

ACK_WAIT = 0.5  # the test master's: how long owed acknowledgements hold a drain, at most


async def test_a_tenant_that_never_acknowledges_does_not_hold_a_drain_forever() -> None:
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        master = await c.start_master(dataclasses.replace(FAST, drain_ack_wait=ACK_WAIT))
        ops = await operator(c)
        # the tenant: a framework that acknowledges nothing, ever
        fw = await c.framework("mallory", failover_timeout=7 * 24 * 3600)
        slave = await c.slave("s1", Resources(cpus=4, mem=4 * GB))
        offer = await fw.next_offer()
        await fw.accept(offer, [fw.task(offer, SMALL, "t1")], refuse=0)
        await slave.run_task()
        await fw.update_for("t1", TaskState.RUNNING)
        await ops.call(DrainSlave(slave_id="s1", max_grace_period=1))
        await slave.inbox.wait_for(KillTask)
        await slave.report(fw.framework_id, "t1", TaskState.KILLED)
        await fw.update_for("t1", TaskState.KILLED)
        await eventually(lambda: not master.books.slaves["s1"].tasks)
        # while the framework may still answer, the drain waits for it, as Mesos's does,
        # and the state says what it waits for
        master.drains.check()
        assert master.books.maintenance["s1"].drain == DRAINING
        waiting = master.views.slave_view("s1")
        assert (waiting.maintenance, waiting.drain_acks_owed) == ("draining", 1)
        # but not past the bound: the slave is DRAINED, and the operator may take it back
        await eventually(lambda: master.books.maintenance["s1"].drain == DRAINED, timeout=5)
        drained = master.views.slave_view("s1")
        assert (drained.maintenance, drained.drain_acks_owed) == ("drained", 0)
        await ops.call(ReactivateSlave(slave_id="s1"))
        await eventually(lambda: "s1" not in master.books.maintenance)
        # what the framework is owed it is still owed: sent again until it acknowledges
        assert any(
            p.slave_id == "s1" for p in master.books.frameworks[fw.framework_id].pending.values()
        )
