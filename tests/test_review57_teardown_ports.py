"""Review 57: a torn-down framework's tasks keep their ports through their kill grace, and
the master gives the ports to the next framework at once: one port, two tasks.

`Removals.remove_framework` frees everything the framework held, its tasks' port values
too (master/slave_values.py counts the ports of the tasks in the books), the moment its
slaves are told to shut it down; each task there is SIGTERMed and runs on for its grace
(up to the slave's --max-kill-grace, 60 s by default), still bound to its port. The next
framework's offer names that port and its task is launched on it: it cannot bind
(EADDRINUSE), or, where the port is routed to by address (a load balancer, DNS, another
tenant's clients), the torn-down tenant's process -- trapping SIGTERM for its minute --
is what answers on it. A preemption holds a victim's room until its task has ended; a
teardown does not. (The same root as tests/test_review57_teardown_grace.py, for values a
task holds by name: a port cannot be shared, however the slave's CPUs are.)

In process, on the memory transport (the fixtures of tests/test_ports.py)."""

from __future__ import annotations

import pytest
from test_ports import PORTS, SLAVE, ports, web

from protocol.wire.messages import ShutdownFramework, Teardown
from protocol.wire.values import KillPolicy

from harness.master import Cluster
from harness.master import cluster as cluster

pytestmark = pytest.mark.timeout(60)


async def test_a_torn_down_frameworks_port_is_not_offered_while_its_task_holds_it(
    cluster: Cluster,
) -> None:
    a = await cluster.framework("A")
    s1 = await cluster.slave("s1", SLAVE, PORTS)
    offer = await a.next_offer()
    task = web(a, offer, "t1", ports((31000, 31000))).model_copy(
        update={"kill_policy": KillPolicy(grace_period=60)}
    )
    await a.accept(offer, [task], refuse=60)
    await s1.run_task()
    s1.ends_shut_down_frameworks = False  # (its task in its grace: not ended)
    shutdowns = len(s1.inbox.of(ShutdownFramework))
    await a.bus.publish(a.to_master, Teardown(framework_id=a.framework_id))
    await s1.inbox.wait_count(ShutdownFramework, shutdowns + 1)  # (SIGTERM; 60 s of grace)

    b = await cluster.framework("B")
    other = await b.next_offer()
    held = ports((31000, 31000))["ports"]
    offered = other.discrete.get("ports")
    assert offered is None or not offered.overlaps(held), (
        f"B is offered ports {offered} while A's torn-down task, in its grace, still holds "
        f"{held} on the slave"
    )
