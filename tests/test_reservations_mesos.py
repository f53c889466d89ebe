"""Reservations on Mesos's v1 APIs, spoken as a Mesos client speaks them: an operator's
RESERVE_RESOURCES / UNRESERVE_RESOURCES on `POST /api/v1`, a framework's RESERVE and
UNRESERVE in an ACCEPT, offers carrying `reservations`, and the classic `/slaves`
`reserved_resources`. A hostile framework principal can neither reserve for another role
nor unreserve its reservation, nor is it offered it."""

from __future__ import annotations

from typing import Any

import aiohttp

from benchmarks.mesos_client import MesosScheduler
from protocol.mesos_json import resources_from_mesos, resources_to_mesos
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.mesos import Live, framework_info, next_of, operator_call
from harness.mesos import live as live

R = Resources.parse


def test_reservations_round_trip_through_mesos_json() -> None:
    r = R("cpus(a):1;cpus(a,p,{k=v}):2;mem(a)(a/b,p):3;disk(a,p)[v1:data]:4;cpus:5")
    as_json = resources_to_mesos(r, "a")
    assert resources_from_mesos(as_json) == r
    one = next(j for j in as_json if j.get("reservation"))
    # the refined stack, and the pre-refinement form for older clients beside it
    assert one["reservations"] == [
        {"type": "DYNAMIC", "role": "a", "principal": "p",
         "labels": {"labels": [{"key": "k", "value": "v"}]}}
    ]  # fmt: skip
    assert one["role"] == "a"
    volume = next(j for j in as_json if j.get("disk"))
    assert volume["disk"]["persistence"]["id"] == "v1"
    assert volume["disk"]["volume"]["container_path"] == "data"
    # as Mesos's pre-1.4 clients send a static reservation
    legacy = [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1}, "role": "a"}]
    assert resources_from_mesos(legacy) == R("cpus(a):1")


operator = operator_call


async def slaves(live: Live) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(live.web + "slaves", headers={"Authorization": live.auth("ops")}) as r,
    ):
        body: dict[str, Any] = await r.json()
        return body


def reserve_call(kind: str, resources: Resources) -> dict[str, Any]:
    field = kind.lower()
    return {
        "type": kind,
        field: {"agent_id": {"value": "s0"}, "resources": resources_to_mesos(resources)},
    }


async def offer_of(s: MesosScheduler) -> dict[str, Any]:
    [offer] = (await next_of(s, "OFFERS"))["offers"]
    return dict(offer)


async def test_an_operators_reservation_is_offered_to_its_role_alone(live: Live) -> None:
    theirs = R("cpus(team-a,ops):1;mem(team-a,ops):128")
    assert (await operator(live, reserve_call("RESERVE_RESOURCES", theirs)))[0] == 200
    slave = (await slaves(live))["slaves"][0]
    assert slave["reserved_resources"] == {"team-a": {"cpus": 1.0, "mem": 128.0}}
    assert slave["unreserved_resources"]["cpus"] == slave["resources"]["cpus"] - 1
    # a framework principal may not make operator calls
    assert (await operator(live, reserve_call("UNRESERVE_RESOURCES", theirs), "team-b"))[0] == 403
    a, b = live.scheduler("team-a"), live.scheduler("team-b")
    try:
        assert await b.subscribe(framework_info("team-b")) == 200
        offer = await offer_of(b)
        assert not [r for r in offer["resources"] if r.get("reservations")]
        # not even for its own role: the operator did not let team-b reserve (an idle
        # cluster it reserved would be kept from every other role)
        own = R("cpus(team-b,team-b):1")
        ops = [{"type": "RESERVE", "reserve": {"resources": resources_to_mesos(own)}}]
        accept = {"offer_ids": [offer["id"]], "operations": ops, "filters": {"refuse_seconds": 0}}
        assert (await b.call("ACCEPT", accept))[0] == 202
        offer = await offer_of(b)
        assert not [r for r in offer["resources"] if r.get("reservations")]
        # team-b names team-a's reservation: dropped, as Mesos drops an invalid operation
        hostile = [
            {"type": "UNRESERVE", "unreserve": {"resources": resources_to_mesos(theirs)}},
            {"type": "RESERVE",
             "reserve": {"resources": resources_to_mesos(R("cpus(team-a,team-b):1"))}},
        ]  # fmt: skip
        accept = {"offer_ids": [offer["id"]], "operations": hostile}
        assert (await b.call("ACCEPT", accept))[0] == 202
        assert live.master is not None
        before = live.master.books.slaves["s0"].total
        assert await a.subscribe(framework_info("team-a")) == 200
        offer = await offer_of(a)
        got = resources_from_mesos(offer["resources"])
        assert got.contains(theirs)
        assert live.master.books.slaves["s0"].total == before  # nothing changed
        assert live.master.outbox.refused["invalid-operation"] == 3
        # team-a gives it back: its principal did not reserve it (ops did), so no
        back = {"type": "UNRESERVE", "unreserve": {"resources": resources_to_mesos(theirs)}}
        accept = {"offer_ids": [offer["id"]], "operations": [back],
                  "filters": {"refuse_seconds": 0}}  # fmt: skip
        assert (await a.call("ACCEPT", accept))[0] == 202
        offer = await offer_of(a)
        assert resources_from_mesos(offer["resources"]).contains(theirs)
        # its own reservation it may give back
        mine = R("cpus(team-a,team-a):0.5")
        ops = [{"type": "RESERVE", "reserve": {"resources": resources_to_mesos(mine)}}]
        accept = {"offer_ids": [offer["id"]], "operations": ops, "filters": {"refuse_seconds": 0}}
        assert (await a.call("ACCEPT", accept))[0] == 202
        offer = await offer_of(a)
        assert resources_from_mesos(offer["resources"]).contains(mine)
        ops = [{"type": "UNRESERVE", "unreserve": {"resources": resources_to_mesos(mine)}}]
        accept = {"offer_ids": [offer["id"]], "operations": ops, "filters": {"refuse_seconds": 0}}
        assert (await a.call("ACCEPT", accept))[0] == 202
        offer = await offer_of(a)
        assert not resources_from_mesos(offer["resources"]).contains(mine)
    finally:
        await a.close()
        await b.close()
    # the operator gives team-a's reservation back, once free: anybody's again
    await eventually(
        lambda: live.master is not None and live.master.allocator.free("s0").contains(theirs)
    )
    assert (await operator(live, reserve_call("UNRESERVE_RESOURCES", theirs)))[0] == 200
    assert (await slaves(live))["slaves"][0]["reserved_resources"] == {}
    status, body = await operator(live, reserve_call("UNRESERVE_RESOURCES", theirs))
    assert status == 400
    assert "free" in body["error"]
