"""Review 76: a framework that subscribes again with its framework id keeps the offers its
old connection was made, and nobody can ever answer them.

Scenario. Framework A (failover_timeout 30 s) is offered slave s1 and has not answered
yet. Then either

- a new scheduler process subscribes with A's framework id while the old one's
  connection is still up, or before the broker has noticed it is gone (a scheduler that
  crashed and was restarted at once by systemd, an HA framework's standby taking over);
  or
- A's SDK driver is stopped with `stop(failover=True)`, the SDK's documented hand-over,
  and its successor is started with `framework_id=` (the master never heard the first
  one go, test_review76_stop_failover.py, so nothing rescinded its offers); or
- on the Mesos HTTP API, a second instance SUBSCRIBEs with A's id while the first's
  stream is open (`SchedulerApi._serve` ends the old stream as "not lost", so no
  disconnection, and no rescind, follows).

What Mesos does. `Master::failoverFramework` (and `_subscribe` for a framework already
connected) removes every outstanding offer of the framework and recovers its resources
before the new scheduler is offered anything: "the new scheduler doesn't know about
them". The Mesos scheduler driver, and ours (`SchedulerDriver._on_subscribed`:
`self.offers.clear()  # offers from before a reconnect were rescinded`), forget their
offers on (re-)registration, relying on exactly that.

What drfmesos does. `Subscriptions._subscribed` for a known framework changes its inbox
and incarnation and keeps `fw.offers`; the old connection's Last Will then names an
incarnation that is no longer the framework's and is ignored
(`SlaveCalls.on_gone`). The offer stays booked to A, its resources allocated, with no
offer timeout by default: s1 is never offered to anyone again. The new process never
heard of the offer; the SDK's driver refuses to accept or decline it (`DriverError:
offers ... are not outstanding`). On a small cluster a hand-over strands whole slaves.
(A broker restart is not such a case: the slaves' new connections have their offers
rescinded and made again, which frees these too; `cluster/local/demo.py` runs with
`--offer-timeout`, which hides the rest.)

Why a user relies on it. A framework's restart (its failover, the reason
failover_timeout exists) must not cost it, or the cluster, the resources it was being
offered; Mesos frameworks are written on the promise that a (re-)registration starts
from no outstanding offers.
"""

from __future__ import annotations

from frameworks import Scheduler, SchedulerDriver
from protocol.wire.messages import Offer
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.master import GB, Cluster, T
from harness.master import cluster as cluster
from harness.mesos import Live, framework_info, next_of
from harness.mesos import live as live


class Holding(Scheduler):
    """Answers no offer (each stays outstanding, as a busy scheduler's do a while)."""

    def __init__(self) -> None:
        self.offers: list[Offer] = []

    async def resource_offers(self, driver: object, offers: list[Offer]) -> None:
        self.offers += offers


async def test_a_new_scheduler_process_is_offered_what_the_old_one_was(cluster: Cluster) -> None:
    a = await cluster.framework("A", failover_timeout=30)
    await cluster.slave("s1", Resources(cpus=2, mem=2 * GB))
    offer = await a.next_offer()
    # the old process is restarted, and its successor subscribes with its framework id
    # before the broker has announced the old connection gone
    a2 = await cluster.framework_new_process("A2", a.framework_id)
    # as Mesos's failoverFramework: the old offers are removed, their resources recovered
    assert offer.offer_id not in cluster.master.books.offers
    again = await a2.next_offer()
    assert again.slave_id == "s1"


async def test_a_successor_driver_is_offered_what_its_predecessor_held(cluster: Cluster) -> None:
    await cluster.slave("s1", Resources(cpus=2, mem=2 * GB))
    first = Holding()
    driver = SchedulerDriver(
        first, name="A", broker=cluster.connect, cluster=T.cluster, failover_timeout=30
    )
    await driver.start()
    await eventually(lambda: bool(first.offers))  # (held: it answers none)
    [offer] = first.offers
    driver.stop(failover=True)  # "the master keeps its tasks ... for a successor"
    await driver.join()
    successor = Holding()
    again = SchedulerDriver(
        successor,
        name="A",
        broker=cluster.connect,
        cluster=T.cluster,
        failover_timeout=30,
        framework_id=driver.framework_id,
    )
    await again.start()
    try:
        assert offer.offer_id not in cluster.master.books.offers
        await eventually(lambda: bool(successor.offers))
        assert successor.offers[0].slave_id == "s1"
    finally:
        again.stop()
        await again.join()


async def test_a_mesos_scheduler_taking_over_its_framework_is_offered_anew(live: Live) -> None:
    s, again = live.scheduler(), live.scheduler()
    try:
        assert await s.subscribe(framework_info(failover_timeout=60)) == 200
        [offer] = (await next_of(s, "OFFERS"))["offers"]
        fid = {"value": s.framework_id}
        # a second instance takes the framework over while the first's stream is open
        assert await again.subscribe(framework_info(id=fid), framework_id=fid) == 200
        assert live.master is not None
        assert offer["id"]["value"] not in live.master.books.offers
        [offered] = (await next_of(again, "OFFERS"))["offers"]
        assert offered["agent_id"] == offer["agent_id"]
    finally:
        await again.close()
        await s.close()
