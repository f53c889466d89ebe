"""A hostile tenant with valid credentials against reservations and persistent volumes
(operation grants, GROW_VOLUME / SHRINK_VOLUME, roles taken away): each test says what
must hold, and failed before its fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol import logs
from protocol.tooling.credentials import Principal, Store
from protocol.wire.messages import Accept, Error, Filters, OfferOperation, Rescind, Subscribe
from protocol.wire.resources import Resources
from protocol.wire.values import FrameworkCapability
from slave import volumes
from slave.kept_resources import KeptResources, Version

from harness.fakes import operate
from harness.helpers import eventually
from harness.master import Cluster, acl_cluster
from harness.master import cluster as cluster

R = Resources.parse
SHARED = [FrameworkCapability.SHARED_RESOURCES]
V = "disk(a)[v1:data]<SHARED>"


async def test_a_destroy_of_a_shared_volume_not_in_its_offers_rescinds_nothing(
    cluster: Cluster,
) -> None:
    # Accepts.on_accept rescinds every outstanding offer holding a shared volume
    # a DESTROY names once `may_make` passes -- and may_make asks the grants and the
    # role (framework_problem) only, not whether the Accept's offers hold the volume (nor
    # whether the framework takes shared resources). A tenant of a sub-role (a/x), without
    # SHARED_RESOURCES, whose offer of the slave holds nothing of role a, names a's shared
    # volume in a DESTROY: role a's offer of it is rescinded, then the DESTROY is refused
    # ("not in the offer"). Every offer of the slave it gets, it can do it again.
    await cluster.slave("s1", R(f"cpus:2;mem:1024;disk(a):1024;{V}:64;cpus(a/x):1;mem(a/x):64"))
    victim = await cluster.framework("victim", role="a", capabilities=SHARED)
    mine = await victim.next_offer()
    assert mine.resources[V] == 64
    attacker = await cluster.framework("attacker", role="a/x")
    theirs = await attacker.next_offer()
    assert V not in theirs.resources
    destroy = OfferOperation(type="DESTROY", resources=R(f"{V}:64"))
    await operate(attacker, theirs, destroy)
    await eventually(lambda: any(e.code == "invalid-operation" for e in attacker.inbox.of(Error)))
    await cluster.rounds_pass()
    assert not victim.inbox.of(Rescind), "a's offer rescinded by a DESTROY of nothing offered"
    assert mine.offer_id in cluster.master.books.offers


async def test_a_destroy_of_part_of_a_volume_is_refused(tmp_path: Path) -> None:
    # `_slave_problem` holds GROW_VOLUME and SHRINK_VOLUME to the whole volume, not
    # DESTROY: a DESTROY of 256 of a 512 volume leaves `[v1:data]:256` and 256 of plain
    # reserved disk (the slave keeps the directory, every byte in it). A tenant the operator
    # took resize-volume from shrinks its volume anyway; and a volume is one directory,
    # whole or not at all, in Mesos (a DESTROY names the volume as it is).
    volume = "disk(team,framework)[v1:data]"
    async with acl_cluster(tmp_path, {"framework": {"resize-volume": False}}, "team") as c:
        await c.slave("s1", R(f"cpus:1;mem:64;{volume}:512"))
        fw = await c.framework("fw", role="team")
        offer = await fw.next_offer()
        assert offer.resources[volume] == 512
        for op in (
            OfferOperation(type="SHRINK_VOLUME", resources=R(f"{volume}:512"), subtract=256),
            OfferOperation(type="DESTROY", resources=R(f"{volume}:256")),
        ):
            await operate(fw, offer, op)
            offer = await fw.next_offer(after=fw.offer_count())
        refused = [e.message for e in fw.inbox.of(Error) if e.code == "invalid-operation"]
        assert any("may not resize-volume" in m for m in refused)
        assert c.master.books.slaves["s1"].total.get_millis(volume) == 512_000, (
            "half the volume destroyed: shrunk without resize-volume"
        )


async def test_a_task_on_plain_reserved_disk_does_not_stop_a_volumes_grow(
    cluster: Cluster,
) -> None:
    # `_slave_problem` asks `in_use` of every key a GROW_VOLUME consumes -- the volume
    # *and* its addition, plain disk of the volume's reservation. Any live task (any
    # framework's of the role) using a little of that plain reserved disk as scratch space
    # makes every GROW of every volume on that reservation "a live task uses it", though
    # the addition is free and in the offer (Mesos asks it of the volume alone).
    disk = "disk(team,framework)"
    volume = f"{disk}[v1:data]"
    await cluster.slave("s1", R(f"cpus:2;mem:1024;{disk}:1024;{volume}:100"))
    fw = await cluster.framework("fw", role="team")
    offer = await fw.next_offer()
    scratch = fw.task(offer, R(f"cpus:1;mem:64;{disk}:10"), "scratch")
    await fw.accept(offer, [scratch], refuse=0)
    offer = await fw.next_offer(after=1)
    assert offer.resources.contains(R(f"{volume}:100;{disk}:100"))
    grow = OfferOperation(
        type="GROW_VOLUME", resources=R(f"{volume}:100"), addition=R(f"{disk}:100")
    )
    await operate(fw, offer, grow)
    await fw.next_offer(after=2)
    refused = [e.message for e in fw.inbox.of(Error) if e.code == "invalid-operation"]
    assert not refused, refused
    assert cluster.master.books.slaves["s1"].total.get_millis(volume) == 200_000


async def test_a_volume_id_of_another_role_squats_nothing(cluster: Cluster) -> None:
    # `_slave_problem` refuses a CREATE whose volume id is on the slave in *any* role,
    # though a volume's directory is its role's and its id's (volumes/roles/ROLE/ID,
    # slave.volumes.volume_dir) and Mesos asks an id to be one of a kind within its role.
    # A tenant of role b creates volumes of the ids role a's framework uses (`db`, say) on
    # each slave it is offered its own reserved disk of: role a's CREATE of `db` fails
    # there, and the refusal tells a tenant which ids another role has on the slave.
    await cluster.slave("s1", R("cpus:1;mem:64;disk(b):100;cpus(a):1;mem(a):64;disk(a):100"))
    squatter = await cluster.framework("squatter", role="b")
    offer = await squatter.next_offer()
    await squatter.bus.publish(
        squatter.to_master,
        Accept(
            framework_id=squatter.framework_id, offer_ids=[offer.offer_id],
            operations=[OfferOperation(type="CREATE", resources=R("disk(b)[db:data]:50"))],
            filters=Filters(refuse_seconds=3600),
        ),
    )  # fmt: skip
    await eventually(lambda: "disk(b)[db:data]" in cluster.master.books.slaves["s1"].total)
    victim = await cluster.framework("victim", role="a")
    offer = await victim.next_offer()
    assert offer.resources["disk(a)"] == 100
    await operate(victim, offer, OfferOperation(type="CREATE", resources=R("disk(a)[db:data]:50")))
    await victim.next_offer(after=1)
    refused = [e.message for e in victim.inbox.of(Error) if e.code == "invalid-operation"]
    assert not refused, refused
    assert "disk(a)[db:data]" in cluster.master.books.slaves["s1"].total


async def test_a_tenant_of_a_sub_role_destroys_no_volume_of_another_principal(
    tmp_path: Path,
) -> None:
    # (A policy question as much as a defect: Mesos's default ACLs allow it too.) A
    # framework unreserves only what its own principal reserved (framework_problem), but
    # DESTROY, GROW_VOLUME and SHRINK_VOLUME ask only that the volume's role is its
    # offer's or above it: alice, a tenant of eng/ml, is offered bob's volume on disk bob
    # reserved for eng (hierarchical reservations) and destroys it with the default
    # grants -- bob's data gone (the slave removes the directory). A volume records no
    # creator (Volume.principal is never read from a key), so no grant can tell bob's
    # volumes from alice's; the reservation's principal could.
    volume = "disk(eng,bob)[db:data]"
    grants: dict[str, dict[str, bool]] = {"alice": {}}
    async with acl_cluster(tmp_path, grants, "eng/ml") as c:
        await c.slave("s1", R(f"cpus:1;mem:64;{volume}:100"))
        alice = await c.framework("alice", principal="alice", role="eng/ml")
        offer = await alice.next_offer()
        assert offer.resources[volume] == 100
        await alice.bus.publish(
            alice.to_master,
            Accept(
                framework_id=alice.framework_id, offer_ids=[offer.offer_id],
                operations=[OfferOperation(type="DESTROY", resources=R(f"{volume}:100"))],
                filters=Filters(refuse_seconds=0),
            ),
        )  # fmt: skip
        await alice.next_offer(after=1)
        assert volume in c.master.books.slaves["s1"].total, "bob's volume destroyed by alice"


async def test_a_tenant_cannot_fill_a_slave_with_tiny_volumes(cluster: Cluster) -> None:
    # CREATE is granted by default, and nothing bounds how many volumes a slave holds or
    # how small one is (a millis of disk: 0.001 MB). One Accept (a payload under the
    # intake's 1 MiB) makes 20,000 volumes of 0.001 MB of its role's 1024 MB of reserved
    # disk; three such (75,000 keys: past parse_key's and base_of's 65,536-entry caches)
    # stalled the master's event loop for more than 7.9 s per Accept and re-offer, for
    # every tenant, measured in process (2 cores, load 6.9): each round, each offer,
    # each CheckpointResources carries every key. (The cap is the fixer's to choose: a
    # number of volumes a slave may hold, or a least size; 20,000 on one slave is past any.)
    await cluster.slave("s1", R("cpus:1;mem:64;disk(a):1024"))
    fw = await cluster.framework("fw", role="a")
    offer = await fw.next_offer()
    volumes = Resources.from_millis({f"disk(a)[v{i}:d]": 1 for i in range(20_000)})
    await fw.bus.publish(
        fw.to_master,
        Accept(
            framework_id=fw.framework_id, offer_ids=[offer.offer_id],
            operations=[OfferOperation(type="CREATE", resources=volumes)],
            filters=Filters(refuse_seconds=0),
        ),
    )  # fmt: skip
    await fw.next_offer(after=1, timeout=60)
    total = cluster.master.books.slaves["s1"].total
    assert sum("[" in key for key in total.millis) < 20_000, "20,000 volumes on one slave"


async def test_a_framework_whose_principal_lost_its_role_destroys_nothing_of_it(
    tmp_path: Path,
) -> None:
    # The operator takes role eng from principal x (principals.json re-read): x's
    # framework, subscribed before, is told so and disconnected -- its offer of eng's
    # volume rescinded, nothing of eng offered to it again, a DESTROY on the old offer
    # refused -- and it may not subscribe again in eng.
    volume = "disk(eng,ops)[db:data]"
    async with acl_cluster(tmp_path, {"x": {}}, "eng") as c:
        x = await c.framework("x", principal="x", role="eng", failover_timeout=60)
        await c.slave("s1", R(f"cpus:1;mem:64;{volume}:100"))
        offer = await x.next_offer()
        assert volume in offer.resources
        store = Store(tmp_path / "store")
        store.save({"x": Principal("x", "framework", ("other",))})
        await eventually(lambda: any(e.code == "role-refused" for e in x.inbox.of(Error)))
        assert not c.master.books.frameworks[x.framework_id].connected
        assert offer.offer_id not in c.master.books.offers
        await x.bus.publish(
            x.to_master,
            Accept(
                framework_id=x.framework_id, offer_ids=[offer.offer_id],
                operations=[OfferOperation(type="DESTROY", resources=R(f"{volume}:100"))],
                filters=Filters(refuse_seconds=0),
            ),
        )  # fmt: skip
        await c.rounds_pass()
        assert x.offer_count() == 1, "offered eng's resources after losing eng"
        assert volume in c.master.books.slaves["s1"].total, "eng's volume destroyed by x"
        told = len(x.inbox.of(Error))
        await x.bus.publish(  # (its framework id again, in eng: refused as a new one's)
            x.to_master,
            Subscribe(
                name="x", inbox=x.inbox_id, incarnation=x.bus.incarnation,
                framework_id=x.framework_id, role="eng",
            ),
        )  # fmt: skip
        await eventually(lambda: len(x.inbox.of(Error)) > told)
        assert x.inbox.of(Error)[-1].code == "role-refused"
        assert not c.master.books.frameworks[x.framework_id].connected


async def test_a_volume_destroyed_as_its_slave_died_leaves_nothing_to_a_later_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A DESTROY is written to resources.json before the volume's directory goes: a slave
    # killed between the two kept the directory, named by nothing, and a later CREATE of
    # the same id in the role (another principal of it) was given the destroyed one's
    # files. At its start the slave removes the volumes its file says a DESTROY took; those
    # it names stay, even one its smaller --resources no longer fit (an operator's mistake
    # must not cost data).
    gone, kept, big = "disk(a,alice)[db:d]", "disk(a,alice)[keep:d]", "disk(a,alice)[big:d]"
    slave = KeptResources(tmp_path, R("cpus:1;disk:1024"), logs.get("test"))
    await slave.keep(R(f"{gone}:64;{kept}:64;{big}:512"), Version(1, 1))
    for key in (gone, kept, big):
        volumes.volume_dir(tmp_path, key).mkdir(parents=True)
        (volumes.volume_dir(tmp_path, key) / "secret").write_text(key)

    def killed(*_: object) -> None:
        raise RuntimeError("the slave died here")

    with monkeypatch.context() as m:
        m.setattr(volumes, "remove", killed)
        with pytest.raises(RuntimeError):
            await slave.keep(R(f"{kept}:64;{big}:512"), Version(1, 2), R(f"{gone}:64"))  # DESTROY
    assert (volumes.volume_dir(tmp_path, gone) / "secret").exists()

    restarted = KeptResources(tmp_path, R("cpus:1;disk:256"), logs.get("test"))
    await restarted.load()
    assert not volumes.volume_dir(tmp_path, gone).exists()
    assert (volumes.volume_dir(tmp_path, kept) / "secret").read_text() == kept
    assert big not in restarted.kept  # (its disk is not there: dropped, its data kept)
    assert (volumes.volume_dir(tmp_path, big) / "secret").read_text() == big
