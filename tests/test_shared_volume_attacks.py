"""Attacks on shared persistent volumes (#49), as a hostile or careless tenant with valid
credentials (and, last, a slave) would make them. Each test says what must hold; each
fails on main as of b712652 (the review of #49)."""

from __future__ import annotations

from master.master import Master
from protocol.wire.messages import (
    Accept,
    Filters,
    Offer,
    OfferOperation,
    Rescind,
    TaskInfo,
    TaskState,
    Teardown,
    Update,
)
from protocol.wire.messages import Offers as WireOffers
from protocol.wire.reservations import shared_once, stripped
from protocol.wire.resources import Resources
from protocol.wire.slave import Reregister, RunningTask
from protocol.wire.values import CommandInfo, FrameworkCapability

from harness.fakes import FakeFramework, FakeSlave
from harness.master import Cluster
from harness.master import cluster as cluster

R = Resources.parse
V = "disk(a)[v1:data]<SHARED>"
SHARED = [FrameworkCapability.SHARED_RESOURCES]
SLAVE = f"cpus:2;mem:1024;disk(a):1024;{V}:64"


async def accept(
    fw: FakeFramework,
    offers: list[Offer],
    ops: list[tuple[str, str]],
    tasks: list[TaskInfo] | None = None,
    refuse: float = 0.0,
) -> None:
    await fw.bus.publish(
        fw.to_master,
        Accept(
            framework_id=fw.framework_id,
            offer_ids=[o.offer_id for o in offers],
            operations=[OfferOperation(type=k, resources=R(r)) for k, r in ops],
            tasks=tasks or [],
            filters=Filters(refuse_seconds=refuse),
        ),
    )


def balanced(m: Master) -> None:
    """The allocator's books agree with the master's offers and tasks, framework by
    framework and slave by slave (a shared volume: a copy an offer or task in a framework's
    books, once a slave in the cluster's), and the totals agree. (harness.helpers'
    `books_balance` compares the allocator's stripped total with the books' keyed one, so
    it fails on any slave holding reservations: it cannot be used here.)"""
    a = m.allocator
    want: dict[tuple[str, str], Resources] = {}

    def hold(fid: str, sid: str, r: Resources) -> None:
        want[(fid, sid)] = want.get((fid, sid), Resources()) + r

    for record in m.books.offers.values():
        hold(record.framework_id, record.slave_id, record.resources)
    for fw in m.books.frameworks.values():
        for task in fw.tasks.values():
            if not task.freed:
                hold(fw.framework_id, task.slave_id, task.resources)
        for (sid, _), r in fw.executors.items():
            hold(fw.framework_id, sid, r)
    for fid in a.frameworks:
        for sid in a.slaves:
            assert a.held(fid, sid) == want.get((fid, sid), Resources()), (fid, sid)
    for sid, slave in a.slaves.items():
        out = sum((r for (_, s), r in want.items() if s == sid), Resources())
        once = shared_once(out.millis, slave.total.millis)
        assert a.held_on(sid) == Resources.from_millis(once), sid
        assert slave.total == m.books.slaves[sid].total, sid
    books_total = sum((s.total for s in m.books.slaves.values()), Resources())
    assert a.total == Resources.from_millis(stripped(books_total.millis))


async def two_offers_holding_the_volume(
    cluster: Cluster,
) -> tuple[FakeFramework, FakeSlave, Offer, Offer]:
    """A SHARED_RESOURCES framework of role a holding two outstanding offers of one slave,
    each with a copy of the slave's shared volume: it keeps the second offer of the slave,
    a task of the first ends, and the next round offers it what that freed -- and the
    volume again (`offered_shared` does not ask whether it holds a copy already)."""
    slave = await cluster.slave("s1", R(SLAVE))
    fw = await cluster.framework("f", role="a", capabilities=SHARED)
    offer1 = await fw.next_offer()
    await accept(fw, [offer1], [], [fw.task(offer1, R("cpus:1;mem:128"), "t1")])
    await slave.run_task()
    offer2 = await fw.next_offer(after=1)
    await slave.report(fw.framework_id, "t1", TaskState.FINISHED)
    offer3 = await fw.next_offer(after=2)
    assert offer2.resources[V] == offer3.resources[V] == 64
    return fw, slave, offer2, offer3


# -- HIGH: a tenant's DESTROY of its two copies wedges the slave and corrupts the books --


async def test_destroying_a_shared_volume_held_by_two_of_its_offers_keeps_the_books(
    cluster: Cluster,
) -> None:
    # Accepting both offers at once, the framework names the volume twice over (128 of a
    # 64 volume) in a DESTROY: check_ending sees every copy is its, and update_allocation
    # takes the copies out of its counts, then fails to take 128 out of the slave's
    # total with a ResourceError nobody catches (on_offer catches AllocatorError only).
    # The Accept's handler dies half way: both offers dropped and never declined, so the
    # whole slave stays the framework's for good (never offered again, to anyone), and
    # the allocator's copy counts say it holds none of the two copies its books hold.
    fw, _, offer2, offer3 = await two_offers_holding_the_volume(cluster)
    await accept(fw, [offer2, offer3], [("DESTROY", f"{V}:128")])
    # refused or done, the slave's resources come back: offered again
    again = await fw.next_offer(after=3, timeout=5)
    assert again.resources["cpus"] == 2
    balanced(cluster.master)


async def test_after_that_destroy_a_teardown_gives_the_slave_back(cluster: Cluster) -> None:
    # ...and it is for good: the framework's Teardown fails too (recover of its 128 finds
    # its copy count at 0: AllocatorError in remove_framework, handler_failed), so the
    # framework stays in the allocator holding the whole slave, offered to nobody.
    fw, _, offer2, offer3 = await two_offers_holding_the_volume(cluster)
    await accept(fw, [offer2, offer3], [("DESTROY", f"{V}:128")])
    await fw.bus.publish(fw.to_master, Teardown(framework_id=fw.framework_id))
    other = await cluster.framework("other", role="a", capabilities=SHARED)
    offer = await other.next_offer(timeout=5)
    assert offer.resources["cpus"] == 2
    assert fw.framework_id not in cluster.master.allocator.frameworks


# -- LOW (careless tenant): two offers holding the volume, merged in one Accept ----------


async def test_a_task_on_a_shared_volume_two_of_its_offers_hold_is_launched(
    cluster: Cluster,
) -> None:
    # OfferRoom takes the merged offers' 128 of the volume as its whole size: a task
    # naming the volume (64, all of it) is refused as "part of a persistent volume".
    fw, slave, offer2, offer3 = await two_offers_holding_the_volume(cluster)
    task = fw.task(offer2, R(f"cpus:1;mem:128;{V}:64"), "t2")
    await accept(fw, [offer2, offer3], [], [task])
    run = await slave.run_task()
    assert run.task.task_id == "t2"
    assert not [u for u in fw.inbox.of(Update) if u.status.task_id == "t2"]


async def test_one_task_may_not_take_two_copies_of_a_shared_volume(cluster: Cluster) -> None:
    # ...and a task naming 128 of the 64 volume (two copies in one task) is launched: the
    # slave is sent a task using twice its volume, the framework holds two copies for it.
    fw, _, offer2, offer3 = await two_offers_holding_the_volume(cluster)
    task = fw.task(offer2, R(f"cpus:1;mem:128;{V}:128"), "t3")
    await accept(fw, [offer2, offer3], [], [task])
    await fw.update_for("t3", TaskState.ERROR, timeout=5)
    balanced(cluster.master)


# -- MEDIUM: a tenant of another role rescinds a role's offers at will -------------------


async def test_a_destroy_its_sender_may_not_make_rescinds_no_offer(cluster: Cluster) -> None:
    # Accepts.on_accept calls _rescind_shared(...) for every DESTROY *before*
    # on_offer checks the DESTROY (its role, that its offers hold the volume): a tenant
    # of role b, without SHARED_RESOURCES, naming role a's volume in a DESTROY on any
    # offer of the slave rescinds role a's outstanding offers of it -- every time it is
    # offered the slave, whatever role a's frameworks were about to launch.
    await cluster.slave("s1", R(f"{SLAVE};cpus(b):1;mem(b):64"))
    victim = await cluster.framework("victim", role="a", capabilities=SHARED)
    mine = await victim.next_offer()
    assert mine.resources[V] == 64
    attacker = await cluster.framework("attacker", role="b")
    theirs = await attacker.next_offer()
    assert V not in theirs.resources
    await accept(attacker, [theirs], [("DESTROY", f"{V}:64")])
    await cluster.rounds_pass()
    assert not victim.inbox.of(Rescind), "role a's offer rescinded by role b's refused DESTROY"
    assert mine.offer_id in cluster.master.books.offers


# -- MEDIUM: a custom resource named like a shared volume stops every round --------------


async def test_a_resource_name_ending_in_the_shared_mark_stops_no_round(cluster: Cluster) -> None:
    # A plain name ("lic<SHARED>", a custom resource a slave's --resources may name: plain
    # names are not parsed) passes is_shared / shared_keys, which look at the key's end
    # only; it is in SlaveBook.shared but not in SlaveBook.reserved, so
    # offered_shared's `reserved[k]` raises KeyError in the round as soon as a framework
    # that takes shared resources is picked for such a slave holding any reservation.
    # The round is lost whole (round.failed, every round): no framework is offered any
    # slave, and what the round had allocated before the KeyError stays allocated.
    await cluster.slave("s0", R("cpus:2;mem:1024"))
    await cluster.slave("s1", R("cpus:2;mem:1024;disk(a):100;lic<SHARED>:1"))
    fw = await cluster.framework("f", role="a", capabilities=SHARED)
    offer = await fw.next_offer(timeout=5)
    assert offer.slave_id in ("s0", "s1")
    await cluster.rounds_pass()
    offered = {o.slave_id for b in fw.inbox.of(WireOffers) for o in b.offers}
    assert offered == {"s0", "s1"}


# -- LOW: a slave re-registering with part of a shared volume in a task ------------------


async def test_a_slave_reporting_part_of_a_shared_volume_is_refused_cleanly(
    cluster: Cluster,
) -> None:
    # The re-registration's check (shared_once(used) within the total) passes a task on
    # 32 of a 64 shared volume; _reconcile_slave records the task, then
    # allocate_existing raises AllocatorError ("a copy is the whole volume"), uncaught:
    # the handler dies with the task in the master's books and not the allocator's, and
    # the slave is never told Registered (each retry the same).
    fw = await cluster.framework("f", role="a", capabilities=SHARED)
    slave = await cluster.slave("s0", R("cpus:1;mem:64"))  # (a bus to speak as a slave)
    task = TaskInfo(
        task_id="t1",
        name="t",
        slave_id="s2",
        resources=R(f"cpus:1;mem:64;{V}:32"),
        command=CommandInfo(value="sleep 1"),
    )
    await slave.bus.publish(
        slave.to_master,
        Reregister(
            slave_id="s2",
            hostname="s2.local",
            resources=R(SLAVE),
            incarnation=slave.bus.incarnation,
            tasks=[RunningTask(framework_id=fw.framework_id, task=task, state=TaskState.RUNNING)],
        ),
    )
    m = cluster.master
    await cluster.rounds_pass()
    balanced(m)  # refused, or taken whole: either way the books agree
    if "s2" in m.books.slaves:
        assert "t1" not in m.books.frameworks[fw.framework_id].tasks or m.allocator.held(
            fw.framework_id, "s2"
        ).get_millis(V)


# -- LOW: a framework that dropped SHARED_RESOURCES still launches on the volume ---------


async def test_a_framework_that_drops_the_capability_launches_nothing_on_a_shared_volume(
    cluster: Cluster,
) -> None:
    # Subscribing again without SHARED_RESOURCES (take_shared(False)) neither rescinds
    # its outstanding offers holding a shared volume nor stops an Accept of them: three
    # tasks then run on the volume (three copies) for a framework that says it does not
    # take shared resources. (Mesos checks the capability where a task uses one; here
    # only CREATE checks it, resource_operations.framework_problem.)
    slave = await cluster.slave("s1", R(SLAVE))
    fw = await cluster.framework("f", role="a", capabilities=SHARED, failover_timeout=60)
    offer = await fw.next_offer()
    await fw.subscribe("f", role="a", framework_id=fw.framework_id, failover_timeout=60)
    tasks = [fw.task(offer, R(f"cpus:0.5;mem:64;{V}:64"), f"t{i}") for i in range(3)]
    await accept(fw, [offer], [], tasks)
    await cluster.rounds_pass()
    assert not [r for r in slave.runs() if V in r.task.resources]


async def test_an_operators_destroy_takes_a_shared_volume_back_from_offers(
    cluster: Cluster,
) -> None:
    # an operator's DESTROY_VOLUMES of a shared volume no task uses, while frameworks that
    # take shared resources hold offers of it: those offers are rescinded first, as a
    # framework's DESTROY rescinds them, and the volume is gone (it was refused before:
    # the offers' copies kept it allocated)
    await cluster.slave("s1", R(f"cpus:1;mem:64;{V}:64"))
    fw = await cluster.framework("fw", role="a", capabilities=SHARED)
    offer = await fw.next_offer()
    assert offer.resources[V] == 64
    destroy = OfferOperation(type="DESTROY", resources=R(f"{V}:64"))
    cluster.master.resource_operations.by_operator("s1", destroy, "ops")
    await fw.inbox.wait_for(Rescind, lambda r: r.offer_id == offer.offer_id)
    assert V not in cluster.master.books.slaves["s1"].total
    later = await fw.next_offer(after=1)
    assert V not in later.resources
    assert later.resources["disk(a)"] == 64
