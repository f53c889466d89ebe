"""Review 68: a RESERVE of ports is refused ("resources named by their values (ranges,
sets) are reserved in the slave's --resources only") -- unless every port of the slave
is reserved already.

`ResourceOperations._slave_problem` asks whether the operation's *base* names
(`ports`) are among the slave's valued resources, whose names are keyed as given:
a slave offering `ports(svc):[8000-8010]` alone (the ports how-to's own example) has
`ports(svc)` there, not `ports`, so a framework of `svc/web` refines 3 of the ports
reserved for `svc` (`ports(svc)(svc/web,...)`): their count moves to a key no value is
named by, the values stay behind under `ports(svc)`. Those ports are then neither
launchable (no offer holds values for the refined count) nor offered to the rest of
`svc`, and the slave's checkpoint counts a total its --resources' values do not.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from master.ha.registry import MemoryStore, Registry
from protocol.transport.aio import within
from protocol.wire.discrete import parse_resources
from protocol.wire.messages import OfferOperation
from protocol.wire.resources import Resources
from slave.slave import Slave, SlaveConfig

from harness.fakes import operate
from harness.helpers import eventually
from harness.master import Cluster, T, master_on
from harness.master import cluster as cluster

R = Resources.parse
SLAVE = "cpus:2;mem:512;ports(svc):[8000-8010]"


async def test_reserved_ports_are_not_refined_by_a_reserve(cluster: Cluster) -> None:
    master = cluster.master
    resources, values = parse_resources(SLAVE)
    await cluster.slave("s1", resources, values)
    fw = await cluster.framework("web", role="svc/web")
    offer = await fw.next_offer()
    assert offer.resources["ports(svc)"] == 11
    before = master.books.slaves["s1"].total
    refine = OfferOperation(type="RESERVE", resources=R("ports(svc)(svc/web,):3"))
    await operate(fw, offer, refine)
    await eventually(lambda: offer.offer_id not in master.books.offers)
    await cluster.rounds_pass()
    after = master.books.slaves["s1"].total
    assert after == before, f"3 of svc's ports refined to svc/web, their values left: {after}"


async def real_slave(cluster: Cluster, work_dir: Path, n: int) -> Slave:
    """Slave s1 (a real one, simulated tasks) on `work_dir`, offering reserved ports only."""
    resources, values = parse_resources(SLAVE)
    bus = await cluster.stack.enter_async_context(
        cluster.connect(name=f"s1-{n}", inbox=T.slave("slave", "s1"), will=None)
    )
    config = SlaveConfig(
        slave_id="s1",
        hostname="s1.local",
        resources=resources,
        discrete=values,
        work_dir=work_dir,
        cluster=T.cluster,
        simulated_tasks=True,
    )
    slave = Slave(bus, T, config)
    await slave.start()
    cluster.stack.push_async_callback(slave.stop)
    return slave


async def test_a_tenants_refined_ports_keep_no_slave_from_registering(
    cluster: Cluster, tmp_path: Path
) -> None:
    """What the RESERVE leaves behind, once the slave restarts: its checkpointed total
    counts 8 of the 11 values its --resources name, which its Register may not carry
    (`counted` refuses a count that disagrees with its values), so a slave a tenant
    refined a port of never registers again (`announce` raises "slave resources:
    ports(svc) is 8 but its values [8000-8010] count 11" in its registration loop, which
    ends). A restart of the slave, after any reboot, or the operator's upgrade."""
    master = cluster.master
    first = await real_slave(cluster, tmp_path / "s1", 0)
    await first.registered.wait()
    fw = await cluster.framework("web", role="svc/web")
    offer = await fw.next_offer()
    refine = OfferOperation(type="RESERVE", resources=R("ports(svc)(svc/web,):3"))
    await operate(fw, offer, refine)
    await eventually(lambda: offer.offer_id not in master.books.offers)
    await cluster.rounds_pass()
    await first.stop()
    again = await real_slave(cluster, tmp_path / "s1", 1)
    try:
        await within(again.registered.wait(), 5.0)
    except TimeoutError:
        raise AssertionError(
            f"slave s1 did not register again after a tenant's RESERVE: its total "
            f"{again.resources.total}, its ports {again.config.discrete}"
        ) from None


async def test_a_tenants_refined_ports_keep_no_slave_from_following_a_failover(
    tmp_path: Path,
) -> None:
    """Nor need it restart: the slave's total is its checkpoint's at once, so when a new
    master leads, its Reregister is refused by itself the same way, and the new leader
    never hears of it (its tasks are lost with it after --slave-reregister-timeout)."""
    store = MemoryStore()
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        async with master_on(c, Registry(store), "master-1") as first:
            c.master = first
            slave = await real_slave(c, tmp_path / "s1", 0)
            await slave.registered.wait()
            fw = await c.framework("web", role="svc/web", failover_timeout=60)
            offer = await fw.next_offer()
            refine = OfferOperation(type="RESERVE", resources=R("ports(svc)(svc/web,):3"))
            await operate(fw, offer, refine)
            # (the rig waited for the refinement in the slave's checkpoint: refused now,
            # none comes; it waits for the Accept's answer)
            await eventually(lambda: offer.offer_id not in first.books.offers)
            await c.rounds_pass()
            assert "ports(svc)(svc/web,framework)" not in slave.resources.kept.millis
        registry = Registry(store)
        await registry.load()
        async with master_on(c, registry, "master-2") as second:
            try:
                await eventually(lambda: "s1" in second.books.slaves, timeout=5.0)
            except (TimeoutError, AssertionError):
                raise AssertionError(
                    f"slave s1 never re-registered with the new leader: its total "
                    f"{slave.resources.total}, its ports {slave.config.discrete}"
                ) from None


async def test_a_checkpoint_of_refined_ports_from_before_keeps_no_slave_away(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A slave whose checkpoint a master from before the refusal wrote (3 of its 11
    reserved ports refined) drops that count at its start, logged, and registers with
    its --resources' ports whole (the values never followed the count)."""
    work_dir = tmp_path / "s1"
    work_dir.mkdir()
    (work_dir / "resources.json").write_text('{"ports(svc)(svc/web,framework)": 3.0}\n')
    slave = await real_slave(cluster, work_dir, 0)
    await within(slave.registered.wait(), 5.0)
    assert slave.resources.total == R("cpus:2;mem:512;ports(svc):11")
    await eventually(lambda: "s1" in cluster.master.books.slaves)
    assert cluster.master.books.slaves["s1"].total == slave.resources.total
