"""Review 76: `SchedulerDriver.stop(failover=True)` leaves the framework connected in the
master's books for ever: its failover timeout never starts, and it goes on being offered.

Scenario. A framework with failover_timeout 30 s stops its driver with
`driver.stop(failover=True)` -- the SDK's documented way to leave "the master keeps its
tasks for `failover_timeout` for a successor" (frameworks/driver.py). No successor
comes, or one comes a minute later.

What Mesos does. The driver's `stop(failover=true)` sends no unregistration; the
scheduler's connection closes (libprocess's `exited`, or the end of the v1 SUBSCRIBE
stream) and the master calls `_exited(framework)`: the framework is deactivated, its
offers rescinded and recovered, and its failover timer starts; when it runs out the
framework is removed and its tasks killed.

What drfmesos does. The driver closes its bus cleanly (an MQTT DISCONNECT), and the
broker sends no Last Will for a clean disconnect (MemoryTransport.close says so; so
does MQTT). The master is told nothing, so the framework stays `connected`: nobody
counts its failover timeout, so it is never removed and its tasks run on for good; the
allocator keeps offering to an inbox nobody reads, and with no offer timeout (the
default) each offer holds its slave's resources from everyone else for good. (The
hostile-tenant test of `--max-failover-timeout` publishes the will by hand before
stop(failover=True): the case this leaves out. On mosquitto too a clean close sends
no will: test_bus.py's test_a_clean_close_sends_no_last_will.)

Why a user relies on it. failover_timeout is a framework's promise to the cluster: "if
I am gone this long, clean up after me". A framework that stops with failover=True and
is never restarted (a decommissioned service, an upgrade that renamed it) must not
hold its tasks and offers for ever.
"""

from __future__ import annotations

from frameworks import Scheduler, SchedulerDriver
from protocol.wire.messages import Offer
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.master import GB, Cluster, T
from harness.master import cluster as cluster


class Idle(Scheduler):
    """Takes no offer (they stay outstanding, as a busy scheduler's do for a while)."""

    def __init__(self) -> None:
        self.offers: list[Offer] = []

    async def resource_offers(self, driver: object, offers: list[Offer]) -> None:
        self.offers += offers


async def test_a_driver_stopped_for_failover_is_disconnected_and_its_offers_taken_back(
    cluster: Cluster,
) -> None:
    await cluster.slave("s1", Resources(cpus=2, mem=2 * GB))
    idle = Idle()
    driver = SchedulerDriver(
        idle, name="A", broker=cluster.connect, cluster=T.cluster, failover_timeout=30
    )
    await driver.start()
    fid = driver.framework_id or ""
    await eventually(lambda: bool(idle.offers))  # (outstanding: it answers none)
    driver.stop(failover=True)
    await driver.join()
    # a call of the same principal after it: the intake serves a principal's calls and
    # its Last Will in order, so when this is answered anything the broker said of the
    # driver's connection has been handled
    later = await cluster.framework("later", principal=driver.principal)
    assert later.framework_id
    fw = cluster.master.books.frameworks[fid]
    assert not fw.connected  # its failover timeout runs
    assert not fw.offers  # and what it was offered is back in the pool
