"""A multi-role framework's offer filters are its roles' own, as Mesos keeps them
(`FrameworkInfo.offer_filters`, a map by role; `HierarchicalAllocatorProcess::allocatable`
reads `framework.minAllocatableResources.at(role)` and, for a role the map does not
name, the master's `--min_allocatable_resources`). drfmesos took the first role's that
had one for every role: a framework that asked for 4-cpu offers in `batch` was offered
nothing smaller in `web` either."""

from __future__ import annotations

from typing import Any

from master.mesos_api.scheduler_calls import parse_call, subscribe_of
from protocol.wire.messages import Offers
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.master import GB, Cluster
from harness.master import cluster as cluster

FOUR = {"min_allocatable_resources": {"quantities": [{"quantities": {"cpus": {"value": 4}}}]}}


def subscription(offer_filters: dict[str, Any]) -> dict[str, Any]:
    """Our Subscribe's fields for a Mesos MULTI_ROLE framework in web and batch."""
    info = {
        "name": "m",
        "roles": ["web", "batch"],
        "capabilities": [{"type": "MULTI_ROLE"}],
        "offer_filters": offer_filters,
    }
    sub = subscribe_of(
        parse_call({"type": "SUBSCRIBE", "subscribe": {"framework_info": info}}),
        "framework",
        "inbox",
        "inc",
    )
    filters = sub.offer_filters
    return {"roles": sub.roles, "capabilities": sub.capabilities, "offer_filters": filters}


async def test_a_role_without_offer_filters_takes_the_masters_minimum(cluster: Cluster) -> None:
    fw = await cluster.framework("M", **subscription({"batch": FOUR}))
    await cluster.slave("small", Resources(cpus=2, mem=2 * GB))  # under batch's 4 cpus
    await eventually(lambda: fw.offer_count() >= 1)
    await cluster.slave("big", Resources(cpus=4, mem=2 * GB))
    await eventually(lambda: fw.offer_count() >= 2)
    offers = [o for batch in fw.inbox.of(Offers) for o in batch.offers]
    assert {(o.slave_id, o.role) for o in offers} == {("small", "web"), ("big", "batch")}


async def test_each_role_has_its_own(cluster: Cluster) -> None:
    """web asks for 8 cpus, batch for anything (an empty list of quantities)."""
    eight = {"min_allocatable_resources": {"quantities": [{"quantities": {"cpus": {"value": 8}}}]}}
    anything = {"min_allocatable_resources": {}}
    fw = await cluster.framework("M", **subscription({"web": eight, "batch": anything}))
    await cluster.slave("small", Resources(cpus=2, mem=2 * GB))
    [offer] = [o for batch in (await fw.inbox.wait_for(Offers),) for o in batch.offers]
    assert offer.role == "batch"
    await cluster.rounds_pass(3)
    assert fw.offer_count() == 1  # web's 8 cpus are nowhere
