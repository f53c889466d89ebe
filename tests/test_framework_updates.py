"""A framework's UpdateFramework (Mesos 1.9's UPDATE_FRAMEWORK): what may change of it,
changed without subscribing again -- through the SDK's `update_framework`, and on the bus
as a tenant may send it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_multi_role import MULTI, WHOLE, acl_cluster, offers_of, roles_balance

from frameworks import SchedulerDriver, build_task
from frameworks.errors import DriverError
from frameworks.framework_update import update_of
from master.ha.registry import Registry
from master.master import MasterConfig
from protocol.wire.messages import (
    Error,
    FrameworkCapability,
    FrameworkUpdated,
    OfferFilters,
    Rescind,
    Subscribe,
    TaskState,
    UpdateFramework,
)
from protocol.wire.resources import Resources

from harness.helpers import Recorder, books_balance, eventually, in_process_cluster
from harness.master import Cluster, T
from harness.master import cluster as cluster


async def test_an_sdk_framework_gains_a_role_and_leaves_one_once_its_task_there_ended(
    tmp_path: Path,
) -> None:
    config = MasterConfig(allocation_interval=0.1)
    async with in_process_cluster("upd", tmp_path, config) as c:
        rec = Recorder()
        driver = SchedulerDriver(
            rec, name="multi", broker=c.connect, cluster="upd", roles=["web", "batch"]
        )
        await driver.start()
        try:
            fid = driver.framework_id or ""
            await rec.wait(lambda: {o.role for o in rec.offers} >= {"web"})
            offer = next(o for o in rec.offers if o.role == "web")
            task = build_task(
                offer, "web", Resources(cpus=1, mem=64), command="sleep 300", task_id="w"
            )
            await driver.launch_tasks([offer.offer_id], [task])
            await rec.update("w", TaskState.RUNNING)

            # web holds a task: it may not go, and nothing changes
            with pytest.raises(DriverError, match="still runs task w in role web"):
                await driver.update_framework(roles=["ops"])
            assert driver.roles == ["web", "batch"]
            assert c.master.books.frameworks[fid].all_roles() == ["web", "batch"]

            # ops comes, batch goes (it holds offers only: they are rescinded)
            seen = len(rec.offers)
            roles = await driver.update_framework(roles=["web", "ops"], name="renamed")
            assert roles == ["web", "ops"]
            fw = c.master.books.frameworks[fid]
            assert (fw.all_roles(), fw.name) == (["web", "ops"], "renamed")
            assert c.master.allocator.clients.roles(fid) == ["web", "ops"]
            await rec.wait(lambda: any(o.role == "ops" for o in rec.offers[seen:]))
            assert all(o.role in ("web", "ops") for o in rec.offers[seen:])
            registry = Registry(c.master.registry.store)  # what a new leader reads
            await registry.load()
            assert registry.frameworks[fid].roles == ["web", "ops"]
            assert registry.frameworks[fid].name == "renamed"

            # its task in web ended: web may go now
            await driver.kill_task("w")
            await rec.update("w", TaskState.KILLED)
            await eventually(lambda: not c.master.books.frameworks[fid].tasks)
            assert await driver.update_framework(roles=["ops"]) == ["ops"]
            assert c.master.allocator.clients.roles(fid) == ["ops"]
            books_balance(c.master)
            roles_balance(c.master)
        finally:
            driver.stop()
            await driver.join()


async def test_an_update_rescinds_the_offers_and_keeps_what_may_not_change(
    cluster: Cluster,
) -> None:
    """Offers outstanding are rescinded (told to it); a framework of one role keeps its
    role and does not become MULTI_ROLE; what is refused changes nothing."""
    fw = await cluster.framework("A", role="web", failover_timeout=30)
    await cluster.slave("s1", WHOLE)
    [offer] = await offers_of(fw, 1)
    to_master = T.inbound("framework", "framework")
    update = UpdateFramework(framework_id=fw.framework_id, name="A2", failover_timeout=60)
    await fw.bus.publish(to_master, update)
    await fw.inbox.wait_for(FrameworkUpdated)
    assert (await fw.inbox.wait_for(Rescind)).offer_id == offer.offer_id
    books = cluster.master.books.frameworks[fw.framework_id]
    assert (books.name, books.failover_timeout, books.role) == ("A2", 60, "web")
    refused = [
        update.model_copy(update={"role": "ops"}),
        UpdateFramework(framework_id=fw.framework_id, name="A3", roles=["web"], **MULTI),
        update.model_copy(update={"suppressed_roles": ["ops"]}),
    ]
    for i, bad in enumerate(refused):
        await fw.bus.publish(to_master, bad)
        error = (await fw.inbox.wait_count(Error, i + 1))[i]
        assert error.about == "UpdateFramework", error
    assert [e.code for e in fw.inbox.of(Error)] == ["invalid", "invalid", "invalid"]
    assert (books.name, books.role, books.roles) == ("A2", "web", None)
    books_balance(cluster.master)


async def test_a_tenant_gains_no_role_it_may_not_use_nor_anothers_framework(
    tmp_path: Path,
) -> None:
    async with acl_cluster(tmp_path) as c:
        fw = await c.framework("A", roles=["web"], **MULTI)  # allowed web and batch
        await c.slave("s1", WHOLE)
        await offers_of(fw, 1)
        to_master = T.inbound("framework", "framework")
        ops = UpdateFramework(framework_id=fw.framework_id, name="A", roles=["web", "ops"], **MULTI)
        await fw.bus.publish(to_master, ops)
        error = await fw.inbox.wait_for(Error)
        assert error.code == "role-refused"
        assert "may not register in role 'ops'" in error.message
        assert c.master.allocator.clients.roles(fw.framework_id) == ["web"]
        assert "ops" not in {v.role for v in c.master.allocator.roles.views()}
        batch = ops.model_copy(update={"roles": ["web", "batch"]})
        await fw.bus.publish(to_master, batch)  # (a role it may use: in)
        assert (await fw.inbox.wait_for(FrameworkUpdated)).roles == ["web", "batch"]
        roles_balance(c.master)


def test_an_update_names_roles_as_a_subscribe_does() -> None:
    with pytest.raises(ValueError, match="declare the capability"):
        UpdateFramework(framework_id="f", name="a", roles=["web"])
    with pytest.raises(ValueError, match="repeat a role"):
        UpdateFramework(
            framework_id="f",
            name="a",
            roles=["web", "web"],
            capabilities=[FrameworkCapability.MULTI_ROLE],
        )


def updated(subscribed: Subscribe, **given: Any) -> UpdateFramework:
    """`update_of` with what is `given`, and nothing else."""
    changes = ("name", "roles", "failover_timeout", "min_offer", "partition_aware")
    nothing = dict.fromkeys((*changes, "task_killing", "shared_resources"))
    return update_of(subscribed, **(nothing | given))


def test_an_sdk_update_keeps_what_it_is_not_given_and_the_suppressed_roles_it_keeps() -> None:
    subscribed = Subscribe(
        name="a",
        roles=["web", "batch"],
        failover_timeout=30,
        framework_id="f",
        inbox="fw-1",
        offer_filters=OfferFilters(min_allocatable=[Resources(cpus=0.5)]),
        capabilities=[FrameworkCapability.MULTI_ROLE, FrameworkCapability.PARTITION_AWARE],
        suppressed_roles=["web", "batch"],
    )
    kept = updated(subscribed)
    assert (kept.name, kept.roles, kept.failover_timeout) == ("a", ["web", "batch"], 30)
    assert kept.offer_filters == subscribed.offer_filters
    assert set(kept.capabilities) == set(subscribed.capabilities)
    assert kept.suppressed_roles == ["batch", "web"]
    moved = updated(subscribed, roles=["web", "ops"], min_offer=[], task_killing=True)
    assert moved.roles == ["web", "ops"]
    assert moved.suppressed_roles == ["web"]  # (batch is left: its suppression goes)
    assert moved.offer_filters is None  # (no smallest offer now)
    assert {c.value for c in moved.capabilities} == {
        "MULTI_ROLE",
        "PARTITION_AWARE",
        "TASK_KILLING_STATE",
    }
    one_role = Subscribe(name="b", role="web", framework_id="g", inbox="fw-2")
    with pytest.raises(DriverError, match="MULTI_ROLE"):
        updated(one_role, roles=["web"])
