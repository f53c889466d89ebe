"""Review 76: a (re-)subscription sets a framework's suppression to the roles it names
suppressed (Mesos 1.9's `suppressed_roles`, MESOS-9793), and no others: the SDK's driver
names those it suppressed itself, so its own re-subscriptions keep them; a Mesos
scheduler's SUBSCRIBE is read for them; a role not the framework's is refused."""

from __future__ import annotations

from frameworks import Scheduler, SchedulerDriver
from master.mesos_api.scheduler_calls import parse_call, subscribe_of
from protocol.transport.aio import within
from protocol.wire.messages import Error, FrameworkCapability, Subscribe

from harness.helpers import eventually
from harness.master import Cluster, T
from harness.master import cluster as cluster


async def test_a_drivers_own_resubscription_keeps_the_roles_it_suppressed(
    cluster: Cluster,
) -> None:
    driver = SchedulerDriver(
        Scheduler(), name="A", broker=cluster.connect, cluster=T.cluster, roles=["web", "batch"]
    )
    await driver.start()
    try:
        fid = driver.framework_id or ""
        allocator = cluster.master.allocator
        driver.suppress_offers(["batch"])
        await eventually(lambda: allocator.suppressed(fid, "batch"))
        await within(driver._link.subscribe(), 10)  # (as after a reconnect, or a new leader)
        assert allocator.suppressed(fid, "batch")
        assert not allocator.suppressed(fid, "web")
        driver.revive_offers(["batch"])
        await eventually(lambda: not allocator.suppressed(fid, "batch"))
        await within(driver._link.subscribe(), 10)
        assert not allocator.suppressed(fid, "batch")
    finally:
        driver.stop()
        await driver.join()


async def test_a_subscription_may_suppress_only_its_own_roles(cluster: Cluster) -> None:
    a = await cluster.framework("A", failover_timeout=30)
    seen = len(a.inbox.of(Error))
    ask = Subscribe(
        name="A",
        inbox=a.inbox_id,
        framework_id=a.framework_id,
        failover_timeout=30,
        suppressed_roles=["ops"],
    )
    await a.bus.publish(a.to_master, ask)
    error = (await a.inbox.wait_count(Error, seen + 1))[seen]
    assert error.code == "subscribe-refused"
    assert "ops" in error.message
    assert not cluster.master.allocator.suppressed(a.framework_id)


def test_a_mesos_subscribe_is_read_for_its_suppressed_roles() -> None:
    info = {"name": "a", "roles": ["web", "batch"], "capabilities": [{"type": "MULTI_ROLE"}]}
    body = {"framework_info": info, "suppressed_roles": ["batch"]}
    sub = subscribe_of(parse_call({"type": "SUBSCRIBE", "subscribe": body}), "t", "i", "n")
    assert isinstance(sub, Subscribe)
    assert sub.capabilities == [FrameworkCapability.MULTI_ROLE]
    assert sub.suppressed_roles == ["batch"]
