"""Operation grants (Mesos's reserve_resources, unreserve_resources, create_volumes,
destroy_volumes and resize_volume ACLs): kept in principals.json by `drfmesos auth
grant|revoke`, older files still read, and enforced by the master on what a principal
proves it is, never on what its payload names: a hostile tenant naming another role's
volume, another principal's reservation, or its own disk under a grant for another role,
over Mesos's v1 APIs, gains a refusal and changes nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from benchmarks.mesos_client import MesosScheduler
from cluster.cli import main
from cluster.local import reserve_cli
from cluster.local.secure import provision
from protocol.mesos_json import resources_from_mesos, resources_to_mesos
from protocol.tooling.credentials import CredentialsError, load_principals
from protocol.wire.messages import (
    Accept,
    Error,
    Filters,
    FrameworkCapability,
    OfferOperation,
    Rescind,
    Revive,
    TaskState,
)
from protocol.wire.operator import OperateResources
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.master import acl_cluster
from harness.mesos import Live, framework_info, live_cluster, next_of, operator_call

R = Resources.parse


def test_grants_are_kept_listed_and_older_files_read(tmp_path: Path) -> None:
    auth = str(tmp_path / "auth")
    store = provision(Path(auth), [("ops", "operator"), ("team-a", "framework")])
    cli = CliRunner()
    run = cli.invoke(main, ["auth", "grant", auth, "team-a", "reserve", "--role", "team-a"])
    assert run.exit_code == 0, run.output
    assert cli.invoke(main, ["auth", "revoke", auth, "team-a", "destroy-volume"]).exit_code == 0
    assert cli.invoke(main, ["auth", "revoke", auth, "ops", "reserve"]).exit_code == 0
    listed = cli.invoke(main, ["auth", "list", auth]).output
    assert "reserve: team-a; destroy-volume: no" in listed
    assert "(reserve: no)" in listed  # (an operator's, taken back)
    team_a = load_principals(store.principals_file)["team-a"]
    assert team_a.may("reserve", "team-a")
    assert not team_a.may("reserve", "team-b")
    assert not team_a.may("destroy-volume", "team-a")
    assert team_a.may("create-volume", "team-a")  # untouched: the default
    assert not load_principals(store.principals_file)["ops"].may("reserve", "team-a")
    # no such operation, no such principal, a slave's: refused, nothing written
    before = store.principals_file.read_text()
    for bad in (["team-a", "bogus"], ["nobody", "reserve"]):
        assert cli.invoke(main, ["auth", "grant", auth, *bad]).exit_code != 0
    assert store.principals_file.read_text() == before
    # RESERVE for any role is written as before the grants too (a master not yet
    # upgraded reads it); a file from before them (`"reserve": true`) is read as it meant
    store.grant("team-a", "reserve", True)
    [entry] = [e for e in json.loads(store.principals_file.read_text())["principals"]
               if e["name"] == "team-a"]  # fmt: skip
    assert entry["reserve"] is True
    old = {"principals": [{"name": "x", "kind": "framework", "roles": ["x"], "reserve": True}]}
    store.principals_file.write_text(json.dumps(old))
    x = load_principals(store.principals_file)["x"]
    assert x.may("reserve", "x")
    assert x.may("unreserve", "x")
    bad_file = {"principals": [{"name": "x", "kind": "framework",
                                "operations": {"reserve": {"allowed": "yes"}}}]}  # fmt: skip
    store.principals_file.write_text(json.dumps(bad_file))
    with pytest.raises(CredentialsError, match=r"x: operations\.reserve"):
        load_principals(store.principals_file)


# -- a hostile tenant, over Mesos's v1 APIs ------------------------------------------------


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[Live]:
    """The Mesos APIs' master with `--principals`, and slave-0 with disk (a real slave,
    simulated tasks: it keeps what it is told to checkpoint)."""
    async with live_cluster(tmp_path, R("cpus:4;mem:1024;disk:4096"), simulated=True) as c:
        yield c


async def operator(live: Live, kind: str, body: dict[str, Any], name: str = "ops") -> int:
    call = {"type": kind, kind.lower(): {"agent_id": {"value": "s0"}, **body}}
    return (await operator_call(live, call, name))[0]


def mesos(text: str) -> list[dict[str, Any]]:
    return resources_to_mesos(R(text))


def one(text: str) -> dict[str, Any]:
    [resource] = resources_to_mesos(R(text))
    return resource


def grow(volume: str, addition: str) -> dict[str, Any]:
    return {"volume": one(volume), "addition": one(addition)}


def shrink(volume: str, subtract: float) -> dict[str, Any]:
    return {"volume": one(volume), "subtract": {"value": subtract}}


async def offer_of(s: MesosScheduler) -> dict[str, Any]:
    [offer] = (await next_of(s, "OFFERS"))["offers"]
    return dict(offer)


async def accept(s: MesosScheduler, offer: dict[str, Any], *ops: dict[str, Any]) -> None:
    body = {"offer_ids": [offer["id"]], "operations": list(ops), "filters": {"refuse_seconds": 0}}
    assert (await s.call("ACCEPT", body))[0] == 202


async def test_a_hostile_tenant_resizes_creates_and_unreserves_nothing_of_anothers(
    live: Live,
) -> None:
    assert live.master is not None
    master = live.master
    theirs = "disk(team-a,ops)"
    volume = f"{theirs}[v1:data]"
    # the operator reserves disk for team-a and makes a volume on it, grows and shrinks it
    # (and reserves some for team-b, whose grant to make volumes is for another role)
    reserve = {"resources": resources_to_mesos(R(f"{theirs}:2048;disk(team-b,ops):512"))}
    assert await operator(live, "RESERVE_RESOURCES", reserve) == 200
    live.store.grant("team-b", "create-volume", True, ("team-x",))
    create = {"volumes": resources_to_mesos(R(f"{volume}:1024"))}
    assert await operator(live, "CREATE_VOLUMES", create) == 200
    assert await operator(live, "GROW_VOLUME", grow(f"{volume}:1024", f"{theirs}:512")) == 200
    assert master.books.slaves["s0"].total.contains(R(f"{volume}:1536;{theirs}:512"))
    assert await operator(live, "SHRINK_VOLUME", shrink(f"{volume}:1536", 1536)) == 400
    assert await operator(live, "SHRINK_VOLUME", shrink(f"{volume}:1536", 512)) == 200
    # a framework principal's credentials are not an operator's
    assert await operator(live, "SHRINK_VOLUME", shrink(f"{volume}:1024", 512), "team-b") == 403
    before = master.books.slaves["s0"].total
    assert before.contains(R(f"{volume}:1024;{theirs}:1024"))
    refused = master.outbox.refused
    b = live.scheduler("team-b")
    a = live.scheduler("team-a")
    try:
        assert await b.subscribe(framework_info("team-b")) == 200
        offer = await offer_of(b)  # team-a's disk is not offered to team-b
        assert not resources_from_mesos(offer["resources"]).contains(R(f"{volume}:1024"))
        # team-b names team-a's volume and reservation, and reserves in team-a's name
        seen = refused["invalid-operation"]
        hostile = [
            {"type": "GROW_VOLUME", "grow_volume": grow(f"{volume}:1024", f"{theirs}:512")},
            {"type": "SHRINK_VOLUME", "shrink_volume": shrink(f"{volume}:1024", 512)},
            {"type": "UNRESERVE", "unreserve": {"resources": mesos(f"{theirs}:1024")}},
            {"type": "DESTROY", "destroy": {"volumes": mesos(f"{volume}:1024")}},
        ]  # fmt: skip
        await accept(b, offer, *hostile)
        await eventually(lambda: refused["invalid-operation"] == seen + 4)
        assert master.books.slaves["s0"].total == before
        # with create-volume granted for another role only, not on its own role's disk
        await eventually(lambda: master.acl.may("team-b", "create-volume", "team-b") is not None)
        offer = await offer_of(b)
        assert resources_from_mesos(offer["resources"]).contains(R("disk(team-b,ops):512"))
        mine = {"volumes": resources_to_mesos(R("disk(team-b,ops)[v2:data]:512"))}
        await accept(b, offer, {"type": "CREATE", "create": mine})
        await eventually(lambda: refused["invalid-operation"] == seen + 5)
        assert not master.books.slaves["s0"].total.contains(R("disk(team-b,ops)[v2:data]:512"))
        # team-a, its own role's volume: grown (a later offer has it), then its grant
        # taken back: no more
        assert await a.subscribe(framework_info("team-a")) == 200
        offer = await offer_of(a)
        assert resources_from_mesos(offer["resources"]).contains(R(f"{volume}:1024"))
        op = {"type": "GROW_VOLUME", "grow_volume": grow(f"{volume}:1024", f"{theirs}:512")}
        await accept(a, offer, op)
        offer = await offer_of(a)
        assert resources_from_mesos(offer["resources"]).contains(R(f"{volume}:1536"))
        live.store.grant("team-a", "resize-volume", False)
        await eventually(lambda: master.acl.may("team-a", "resize-volume", "team-a") is not None)
        seen = refused["invalid-operation"]
        op = {"type": "SHRINK_VOLUME", "shrink_volume": shrink(f"{volume}:1536", 512)}
        await accept(a, offer, op)
        await eventually(lambda: refused["invalid-operation"] == seen + 1)
        assert master.books.slaves["s0"].total.contains(R(f"{volume}:1536"))
    finally:
        await a.close()
        await b.close()
    # an operator's grants bind it too
    live.store.grant("ops", "destroy-volume", False)
    await eventually(lambda: master.acl.may("ops", "destroy-volume", "team-a") is not None)
    await eventually(lambda: master.allocator.free("s0").contains(R(f"{volume}:1536")))
    destroy = {"volumes": resources_to_mesos(R(f"{volume}:1536"))}
    assert await operator(live, "DESTROY_VOLUMES", destroy) == 400
    assert master.books.slaves["s0"].total.contains(R(f"{volume}:1536"))


def test_volumes_grow_and_shrink_send_the_operators_call(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[OperateResources] = []
    monkeypatch.setattr(reserve_cli, "_call", lambda _b, _c, message, _d, _t: sent.append(message))
    volume = "disk(team-a,ops)[db:data]:512"
    run = CliRunner().invoke(main, ["volumes", "grow", "s0", volume, "disk(team-a,ops):256"])
    assert run.exit_code == 0, run.output
    run = CliRunner().invoke(main, ["volumes", "shrink", "s0", volume, "128"])
    assert run.exit_code == 0, run.output
    grow, shrink = (m.operation for m in sent)
    assert (grow.type, grow.addition) == ("GROW_VOLUME", R("disk(team-a,ops):256"))
    assert (shrink.type, shrink.subtract) == ("SHRINK_VOLUME", 128)
    # refused before anything is sent: a shrink to nothing, an addition of another's disk
    run = CliRunner().invoke(main, ["volumes", "shrink", "s0", volume, "512"])
    assert run.exit_code == 2
    assert "less than the volume's size" in run.output
    run = CliRunner().invoke(main, ["volumes", "grow", "s0", volume, "disk(team-b,ops):256"])
    assert run.exit_code == 2
    assert len(sent) == 2


async def test_a_launch_on_what_a_refused_operation_would_have_made_fails(
    tmp_path: Path,
) -> None:
    # as Mesos: the refused CREATE is dropped, the rest of the Accept goes on, and the
    # task that needed the volume fails (TASK_ERROR); the other task runs
    async with acl_cluster(tmp_path, {"framework": {"create-volume": False}}, "team-a") as c:
        slave = await c.slave("s1", R("cpus:2;mem:512;disk(team-a):100"))
        fw = await c.framework("fw", role="team-a")
        offer = await fw.next_offer()
        volume = R("disk(team-a)[db:data]:100")
        on_volume = fw.task(offer, R("cpus:1;mem:64") + volume, "on-volume")
        plain = fw.task(offer, R("cpus:1;mem:64"), "plain")
        create = OfferOperation(type="CREATE", resources=volume)
        accept = Accept(
            framework_id=fw.framework_id, offer_ids=[offer.offer_id], operations=[create],
            tasks=[on_volume, plain],
        )  # fmt: skip
        await fw.bus.publish(fw.to_master, accept)
        await fw.update_for("on-volume", TaskState.ERROR)
        assert (await slave.run_task()).task.task_id == "plain"
        [refused] = [e for e in fw.inbox.of(Error) if e.code == "invalid-operation"]
        assert "may not create-volume for role 'team-a'" in refused.message
        assert c.master.books.slaves["s1"].total == R("cpus:2;mem:512;disk(team-a):100")


async def test_a_destroy_it_may_not_make_rescinds_no_offer_of_a_shared_volume(
    tmp_path: Path,
) -> None:
    # a tenant without destroy-volume names a shared volume another framework is offered:
    # nothing of it changes, that offer included (as Mesos: authorized first, then the
    # offers holding it rescinded)
    shared = {"capabilities": [FrameworkCapability.SHARED_RESOURCES]}
    revoked = {"framework": {"destroy-volume": False}, "keeper": {}}
    async with acl_cluster(tmp_path, revoked, "role") as c:
        slave = await c.slave("s1", R("cpus:2;mem:1024;disk(role):1024"))
        keeper = await c.framework("keeper", principal="keeper", role="role", **shared)
        offer = await keeper.next_offer()
        volume = R("disk(role)[v1:data]<SHARED>:64")
        create = OfferOperation(type="CREATE", resources=volume)
        task = keeper.task(offer, R("cpus:1;mem:128"), "t1")
        await keeper.bus.publish(keeper.to_master, Accept(
            framework_id=keeper.framework_id, offer_ids=[offer.offer_id], operations=[create],
            tasks=[task], filters=Filters(refuse_seconds=3600),
        ))  # fmt: skip
        await slave.run_task()
        hostile = await c.framework("hostile", role="role", **shared)
        theirs = await hostile.next_offer()
        assert theirs.resources.contains(volume)
        await slave.report(keeper.framework_id, "t1", TaskState.KILLED)
        seen = keeper.offer_count()
        await keeper.bus.publish(keeper.to_master, Revive(framework_id=keeper.framework_id))
        held = await keeper.next_offer(after=seen)
        assert held.resources.contains(volume)
        destroy = OfferOperation(type="DESTROY", resources=volume)
        await hostile.bus.publish(hostile.to_master, Accept(
            framework_id=hostile.framework_id, offer_ids=[theirs.offer_id], operations=[destroy],
        ))  # fmt: skip
        await eventually(
            lambda: any(e.code == "invalid-operation" for e in hostile.inbox.of(Error))
        )
        await c.rounds_pass()
        assert not keeper.inbox.of(Rescind)
        assert held.offer_id in c.master.books.offers
        assert c.master.books.slaves["s1"].total.contains(volume)


def test_a_shared_volume_is_not_resized() -> None:
    volume = R("disk(role)[v1:data]<SHARED>:64")
    with pytest.raises(ValueError, match="a shared volume is not resized"):
        OfferOperation(type="GROW_VOLUME", resources=volume, addition=R("disk(role):64"))
    with pytest.raises(ValueError, match="a shared volume is not resized"):
        OfferOperation(type="SHRINK_VOLUME", resources=volume, subtract=32)
