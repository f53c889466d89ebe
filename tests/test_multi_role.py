"""Multi-role frameworks (Mesos's MULTI_ROLE) through the master, in process: a framework
subscribes with `roles`, is offered in each, every offer names its role, what it launches
is allocated to that role, Suppress and Revive take roles, and a role the principal may
not use refuses the subscription whole."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from frameworks import SchedulerDriver, build_task
from master.allocation.allocator import Allocator
from master.books import Books
from master.counters import SlaveChurn
from master.ha.recovery import Recovery
from master.ha.registry import Registry
from master.master import Master, MasterConfig
from master.mesos_api.classic import framework_v0
from master.mesos_api.doors import master_side
from master.mesos_api.operator_state import framework_json
from protocol import logs
from protocol.tooling.credentials import Principal, Store
from protocol.wire.messages import (
    Error,
    FrameworkCapability,
    Offer,
    Offers,
    Revive,
    Subscribe,
    Suppress,
    TaskState,
    Update,
)
from protocol.wire.resources import Resources
from protocol.wire.why_codes import WhyCode

from harness.fakes import FakeFramework
from harness.helpers import Recorder, books_balance, eventually, in_process_cluster
from harness.master import FAST, GB, Cluster, T
from harness.master import cluster as cluster
from harness.mesos import Live, framework_info, next_of
from harness.mesos import live as live

MULTI = {"capabilities": [FrameworkCapability.MULTI_ROLE]}
WHOLE = Resources(cpus=2, mem=2 * GB)


def roles_balance(master: Master) -> None:
    """What the allocator holds for each role of each multi-role framework is what its
    offers and tasks of that role hold."""
    a = master.allocator
    for fw in master.books.frameworks.values():
        if fw.roles is None:
            continue
        for role in fw.roles:
            held = Resources()
            for offer_id in fw.offers:
                record = master.books.offers[offer_id]
                held = held + (record.resources if record.role == role else Resources())
            for task in fw.tasks.values():
                if not task.freed and fw.role_of(task.info) == role:
                    held = held + task.resources
            assert a.allocation(fw.framework_id, role) == held, role


async def offers_of(fw: FakeFramework, n: int) -> list[Offer]:
    """The first `n` offers it received (once it has)."""
    await eventually(lambda: fw.offer_count() >= n)
    return [o for batch in fw.inbox.of(Offers) for o in batch.offers][:n]


async def test_each_offer_is_one_role_and_a_task_is_allocated_to_its_offers_role(
    cluster: Cluster,
) -> None:
    fw = await cluster.framework("A", roles=["web", "batch"], **MULTI)
    slaves = {sid: await cluster.slave(sid, WHOLE) for sid in ("s1", "s2")}
    offers = await offers_of(fw, 2)
    assert sorted(o.role for o in offers) == ["batch", "web"]
    web = next(o for o in offers if o.role == "web")
    await fw.accept(web, [fw.task(web, Resources(cpus=1, mem=GB))], refuse=1000)
    run = await slaves[web.slave_id].run_task()
    assert run.task.role == "web"  # the slave is told the task's role
    a = cluster.master.allocator
    await eventually(lambda: a.allocation(fw.framework_id, "web") == Resources(cpus=1, mem=GB))
    # what the web task left of its offer, web declined: batch is offered it (the
    # filter is web's alone)
    rest = WHOLE + Resources(cpus=1, mem=GB)
    await eventually(lambda: a.allocation(fw.framework_id, "batch") == rest)
    assert cluster.master.books.frameworks[fw.framework_id].all_roles() == ["web", "batch"]
    books_balance(cluster.master)
    roles_balance(cluster.master)
    # the state, Mesos's v0 state and its v1 GET_FRAMEWORKS say its roles, each task's
    [view] = cluster.master.views.state().frameworks
    assert (view.role, view.roles) == ("web", ["web", "batch"])
    side, books = master_side(cluster.master), cluster.master.books
    v0 = framework_v0(side, books.frameworks[fw.framework_id])
    assert (v0["role"], v0["roles"]) == ("*", ["web", "batch"])
    assert [t["role"] for t in v0["tasks"]] == ["web"]
    v1 = framework_json(side, books.frameworks[fw.framework_id])
    assert v1["framework_info"]["roles"] == ["web", "batch"]
    allocated = {r.get("allocation_info", {}).get("role") for r in v1["allocated_resources"]}
    assert allocated == {"web"}  # (batch holds offers only)
    offered = {r.get("allocation_info", {}).get("role") for r in v1["offered_resources"]}
    assert offered == {"batch"}


async def test_a_task_claiming_another_role_than_its_offers_is_refused(cluster: Cluster) -> None:
    fw = await cluster.framework("A", roles=["web", "batch"], **MULTI)
    await cluster.slave("s1", WHOLE)
    [offer] = await offers_of(fw, 1)
    other = "batch" if offer.role == "web" else "web"
    task = fw.task(offer, Resources(cpus=1, mem=GB)).model_copy(update={"role": other})
    await fw.accept(offer, [task])
    update = await fw.inbox.wait_for(Update)
    assert update.status.state == TaskState.ERROR
    assert f"claim role {other}" in update.status.message
    assert cluster.master.allocator.allocation(fw.framework_id, other) == Resources()
    books_balance(cluster.master)
    roles_balance(cluster.master)


async def test_suppress_and_revive_take_roles(cluster: Cluster) -> None:
    fw = await cluster.framework("A", roles=["web", "batch"], **MULTI)
    to_master = T.inbound("framework", "framework")
    await fw.bus.publish(to_master, Suppress(framework_id=fw.framework_id, roles=["web"]))
    a = cluster.master.allocator
    await eventually(lambda: a.suppressed(fw.framework_id, "web"))
    await cluster.slave("s1", WHOLE)
    [offer] = await offers_of(fw, 1)
    assert offer.role == "batch"  # web suppressed
    await fw.decline(offer, refuse=1000)
    await cluster.rounds_pass(5)
    assert fw.offer_count() == 1  # batch declined it, web suppressed
    await fw.bus.publish(to_master, Revive(framework_id=fw.framework_id, roles=["web"]))
    second = (await offers_of(fw, 2))[1]
    assert second.role == "web"  # batch's filter stands
    # a role it is not in: refused whole, nothing changed
    seen = len(fw.inbox.of(Error))
    await fw.bus.publish(to_master, Suppress(framework_id=fw.framework_id, roles=["web", "ops"]))
    error = (await fw.inbox.wait_count(Error, seen + 1))[seen]
    assert error.code == "invalid-roles"
    assert "ops" in error.message
    assert not a.suppressed(fw.framework_id, "web")
    roles_balance(cluster.master)


async def test_a_multi_role_framework_keeps_its_roles_on_resubscribing(cluster: Cluster) -> None:
    fw = await cluster.framework("A", roles=["web", "batch"], **MULTI, failover_timeout=30)
    again = await cluster.framework_new_process("A2", fw.framework_id)
    assert again.framework_id == fw.framework_id
    seen = len(again.inbox.of(Error))
    await again.bus.publish(
        T.inbound("framework", "framework"),
        Subscribe(
            name="A", inbox="A2", framework_id=fw.framework_id, roles=["web", "ops"], **MULTI
        ),
    )
    error = (await again.inbox.wait_count(Error, seen + 1))[seen]
    assert error.code == "role-refused"
    assert cluster.master.books.frameworks[fw.framework_id].all_roles() == ["web", "batch"]


def test_roles_are_a_multi_role_frameworks_alone() -> None:
    with pytest.raises(ValidationError, match="declare the capability"):
        Subscribe(name="a", inbox="i", roles=["web"])
    with pytest.raises(ValidationError, match="subscribes with roles"):
        Subscribe(name="a", inbox="i", **MULTI)
    with pytest.raises(ValidationError, match="not role"):
        Subscribe(name="a", inbox="i", role="web", roles=["web"], **MULTI)
    with pytest.raises(ValidationError, match="repeat"):
        Subscribe(name="a", inbox="i", roles=["web", "web"], **MULTI)


@contextlib.asynccontextmanager
async def acl_cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    """A master whose principals file lets principal `framework` use web and batch only."""
    store = Store(tmp_path / "store")
    store.path.mkdir()
    store.save({"framework": Principal("framework", "framework", ("web", "batch"))}, {})
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        config = dataclasses.replace(FAST, principals=store.principals_file)
        await c.start_master(config)
        yield c


async def test_a_tenant_listing_a_role_it_may_not_use_is_refused_and_gains_nothing(
    tmp_path: Path,
) -> None:
    async with acl_cluster(tmp_path) as c:
        fw = await c.framework("A", roles=["web", "batch"], **MULTI)  # allowed
        await c.slave("s1", WHOLE)
        await offers_of(fw, 1)
        seen = len(fw.inbox.of(Error))
        await fw.bus.publish(
            T.inbound("framework", "framework"),
            Subscribe(name="m", inbox="A", roles=["web", "ops"], **MULTI),
        )
        error = (await fw.inbox.wait_count(Error, seen + 1))[seen]
        assert error.code == "role-refused"
        assert "may not register in role 'ops'" in error.message
        assert len(c.master.books.frameworks) == 1  # nothing registered
        assert "ops" not in {v.role for v in c.master.allocator.roles.views()}


# -- the SDK ------------------------------------------------------------------------------


async def test_an_sdk_framework_in_two_roles_runs_a_task_in_each(tmp_path: Path) -> None:
    config = MasterConfig(allocation_interval=0.1)
    async with in_process_cluster("mr", tmp_path, config) as c:
        rec = Recorder()
        driver = SchedulerDriver(
            rec, name="multi", broker=c.connect, cluster="mr", roles=["web", "batch"]
        )
        await driver.start()
        try:
            await rec.wait(lambda: {o.role for o in rec.offers} == {"web", "batch"})
            for role in ("web", "batch"):
                offer = next(o for o in rec.offers if o.role == role)
                task = build_task(
                    offer, role, Resources(cpus=1, mem=64), command="true", task_id=role
                )
                await driver.launch_tasks([offer.offer_id], [task])
                await rec.update(role, TaskState.FINISHED)
            # suppressed in web, it is offered in batch alone
            await driver.suppress_offers(["web"])
            fid = driver.framework_id or ""
            await eventually(lambda: c.master.allocator.suppressed(fid, "web"))
            # (one may have come before the suppress, and is held: no other comes then)
            await rec.wait(lambda: any(o.role == "batch" for o in driver.offers.values()))
            assert not c.master.allocator.suppressed(fid, "batch")
            why = await driver.why()  # it is asked of, and says, its roles
            assert why.roles == ["web", "batch"]
            assert {o.slave_id for o in why.offered} <= {"slave-0", "slave-1"}
            # it explains batch, which wants offers, not web's suppression
            assert all(r.code != WhyCode.SUPPRESSED for r in why.reasons), why.reasons
        finally:
            driver.stop()
            await driver.join()


# -- Mesos's scheduler API ------------------------------------------------------------------


async def test_mesos_api_refuses_a_role_not_the_principals_and_suppress_of_another_role(
    live: Live,
) -> None:
    multi = [{"type": "MULTI_ROLE"}]
    hostile = live.scheduler()
    info = {**framework_info(), "roles": ["team-a", "team-b"], "capabilities": multi}
    del info["role"]
    try:
        assert await hostile.subscribe(info) == 403  # team-b is not team-a's to use
    finally:
        await hostile.close()
    assert live.master is not None
    assert not live.master.books.frameworks  # nothing registered, nothing gained
    s = live.scheduler()
    try:
        info["roles"] = ["team-a"]
        assert await s.subscribe(info) == 200
        [offer] = (await next_of(s, "OFFERS"))["offers"]
        assert offer["allocation_info"] == {"role": "team-a"}
        assert {r["allocation_info"]["role"] for r in offer["resources"]} == {"team-a"}
        status, _ = await s.call("SUPPRESS", {"roles": ["team-b"]})
        assert status == 400
        assert (await s.call("SUPPRESS", {"roles": ["team-a"]}))[0] == 202
        fid = s.framework_id
        await eventually(lambda: live.master is not None and live.master.allocator.suppressed(fid))
    finally:
        await s.close()


async def test_mesos_update_framework_answers_200_or_400_and_keeps_the_stream(
    live: Live,
) -> None:
    """UPDATE_FRAMEWORK, as Mesos answers it: 200 once in effect; a role not the
    principal's a 400 that changes nothing, its stream open (its offers come on)."""
    info = {**framework_info(), "roles": ["team-a"], "capabilities": [{"type": "MULTI_ROLE"}]}
    del info["role"]
    s = live.scheduler()
    try:
        assert await s.subscribe(info) == 200
        await next_of(s, "OFFERS")
        fid = {"value": s.framework_id}

        def update(**changed: Any) -> dict[str, Any]:
            return {"framework_info": {**info, "id": fid, **changed}}

        status, body = await s.call("UPDATE_FRAMEWORK", update(roles=["team-a", "team-b"]))
        assert status == 403  # (as Mesos answers an unauthorized role)
        assert "team-b" in body["error"]
        status, _ = await s.call("UPDATE_FRAMEWORK", update(name="renamed", failover_timeout=60))
        assert status == 200
        assert live.master is not None
        fw = live.master.books.frameworks[s.framework_id]
        assert (fw.name, fw.failover_timeout, fw.all_roles()) == ("renamed", 60, ["team-a"])
        # its offers were rescinded by the update, and come again on the same stream
        await next_of(s, "RESCIND")
        await next_of(s, "OFFERS")
        other = {"framework_info": {**info, "id": {"value": "someone-else"}}}
        assert (await s.call("UPDATE_FRAMEWORK", other))[0] == 400
    finally:
        await s.close()


async def test_a_multi_role_framework_is_recovered_in_its_roles_after_a_failover(
    cluster: Cluster,
) -> None:
    fw = await cluster.framework("A", roles=["web", "batch"], **MULTI, failover_timeout=60)
    registry = Registry(cluster.master.registry.store)  # what a new leader reads
    await registry.load()
    assert registry.frameworks[fw.framework_id].roles == ["web", "batch"]
    books, allocator = Books(), Allocator()
    recovery = Recovery(
        books, allocator, registry, SlaveChurn(), logs.get("test"),
        epoch=2, reregister_timeout=5.0, slave_gone=lambda *_: None,
    )  # fmt: skip
    recovery.recover()
    assert books.frameworks[fw.framework_id].all_roles() == ["web", "batch"]
    assert allocator.clients.roles(fw.framework_id) == ["web", "batch"]
    assert allocator.suppressed(fw.framework_id) is False
