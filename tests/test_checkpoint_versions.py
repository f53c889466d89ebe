"""What a slave keeps across restarts is told it versioned, and a volume's data goes by a
DESTROY alone (review 78).

The master numbers each CheckpointResources to a slave (its epoch, then a number past the
last it sent and past what the slave says it applied when it registers: a master of the
same epoch restarted numbers past its predecessor); the slave applies only one newer than
the last it kept, so the broker's second delivery of an older one, or a deposed master's,
changes nothing, across the slave's restarts too. A volume the master's word no longer
names without a DESTROY keeps its data; a CREATE of its role and id finds an empty
directory, the old one's set aside.
"""

from __future__ import annotations

from pathlib import Path

from protocol import logs
from protocol.wire.framework import OfferOperation
from protocol.wire.operator import OperateResources
from protocol.wire.resources import Resources
from protocol.wire.slave import CheckpointResources, Register
from slave import volumes
from slave.kept_resources import KeptResources, Version

from harness.fakes import FakeSlave
from harness.helpers import eventually
from harness.master import Cluster, T
from harness.master import cluster as cluster

R = Resources.parse
VOLUME = "disk(team-a,ops)[pg:data]"


async def operate(cluster: Cluster, op: OfferOperation) -> None:
    await eventually(lambda: "s1" in cluster.master.books.slaves)
    ops = await cluster.stack.enter_async_context(
        cluster.connect(name="ops", inbox=T.outbox("operator", "ops"), will=None)
    )
    await ops.publish(T.inbound("operator", "ops"), OperateResources(slave_id="s1", operation=op))


async def told(s1: FakeSlave, n: int) -> CheckpointResources:
    await s1.inbox.wait_count(CheckpointResources, n)
    return s1.inbox.of(CheckpointResources)[n - 1]


async def test_each_checkpoint_is_numbered_and_a_destroy_names_its_volume(
    cluster: Cluster,
) -> None:
    s1 = await cluster.slave("s1", R("cpus:2;mem:1024;disk:1024"))
    await operate(cluster, OfferOperation(type="RESERVE", resources=R("disk(team-a,ops):512")))
    first = await told(s1, 1)
    await operate(cluster, OfferOperation(type="CREATE", resources=R(f"{VOLUME}:512")))
    second = await told(s1, 2)
    await operate(cluster, OfferOperation(type="DESTROY", resources=R(f"{VOLUME}:512")))
    third = await told(s1, 3)
    epoch = cluster.master.epoch
    assert [(c.epoch, c.version) for c in (first, second, third)] == [
        (epoch, 1),
        (epoch, 2),
        (epoch, 3),
    ]
    assert not first.destroyed
    assert not second.destroyed
    assert third.destroyed == R(f"{VOLUME}:512")
    assert third.resources == R("disk(team-a,ops):512")


async def test_a_slave_registering_with_a_later_version_is_numbered_past_it(
    cluster: Cluster,
) -> None:
    """(A master of the same epoch before this one numbered it: the slave would drop a
    checkpoint numbered from 1 again.)"""
    s1 = FakeSlave(
        await cluster.stack.enter_async_context(
            cluster.connect(name="s1", inbox=T.slave("slave", "s1"), will=None)
        ),
        T,
        "s1",
        R("cpus:2;mem:1024;disk:1024"),
    )
    await s1.bus.subscribe(T.slave("slave", "s1"), s1._hear)
    await s1.bus.publish(
        s1.to_master,
        Register(slave_id="s1", hostname="s1.local", resources=s1.resources, resource_version=41),
    )
    await operate(cluster, OfferOperation(type="RESERVE", resources=R("disk(team-a,ops):512")))
    assert (await told(s1, 1)).version == 42


async def slave_at(work: Path, configured: str) -> KeptResources:
    kept = KeptResources(work, R(configured), logs.get("test"))
    await kept.load()
    return kept


def fill(work: Path, key: str, text: str) -> Path:
    data = volumes.volume_dir(work, key)
    data.mkdir(parents=True)
    (data / "base").write_text(text)
    return data / "base"


async def test_a_deposed_masters_checkpoint_is_dropped_across_a_restart(tmp_path: Path) -> None:
    slave = await slave_at(tmp_path, "cpus:2;mem:1024;disk:1024")
    assert await slave.keep(R(f"{VOLUME}:512"), Version(2, 1))  # the new leader's
    base = fill(tmp_path, VOLUME, "team-a's")
    restarted = await slave_at(tmp_path, "cpus:2;mem:1024;disk:1024")
    assert restarted.version == Version(2, 1)
    # the deposed leader's, numbered higher in its own term
    assert not await restarted.keep(R("disk(team-a,ops):512"), Version(1, 9))
    assert VOLUME in restarted.kept
    assert base.read_text() == "team-a's"


async def test_a_volume_the_master_no_longer_names_without_a_destroy_keeps_its_data(
    tmp_path: Path,
) -> None:
    """(A master that kept the slave's record while it came back too small for the volume
    tells it again without it.)"""
    slave = await slave_at(tmp_path, "cpus:2;mem:1024;disk:1024")
    await slave.keep(R(f"{VOLUME}:512"), Version(1, 1))
    base = fill(tmp_path, VOLUME, "team-a's")
    await slave.keep(R("cpus(team-b,ops):1"), Version(1, 2))
    assert VOLUME not in slave.kept
    assert VOLUME in slave.dropped
    assert base.read_text() == "team-a's"
    restarted = await slave_at(tmp_path, "cpus:2;mem:1024;disk:1024")
    assert VOLUME in restarted.kept  # (it fits: back, for the master to learn)
    assert base.read_text() == "team-a's"


async def test_a_create_of_a_dropped_volumes_id_starts_empty_its_data_set_aside(
    tmp_path: Path,
) -> None:
    slave = await slave_at(tmp_path, "cpus:2;mem:1024;disk:1024")
    await slave.keep(R(f"{VOLUME}:512"), Version(1, 1))
    base = fill(tmp_path, VOLUME, "alice's")
    smaller = await slave_at(tmp_path, "cpus:2;mem:1024;disk:256")
    assert VOLUME in smaller.dropped
    other = "disk(team-a,bob)[pg:data]"  # another principal of the role, the same id
    await smaller.keep(R(f"{other}:128"), Version(1, 2))
    assert not base.exists()  # (the new volume's directory: empty)
    aside = list((tmp_path / "volumes" / "set-aside").glob("*/pg.*/base"))
    assert [p.read_text() for p in aside] == ["alice's"]
    assert VOLUME not in smaller.dropped


async def test_a_directory_named_by_nothing_is_set_aside_not_removed(tmp_path: Path) -> None:
    """(A slave from before `resources.json` named DESTROYs and dropped volumes left it.)"""
    (tmp_path / "resources.json").write_text('{"disk(team-a,ops)": 512}\n')
    base = fill(tmp_path, VOLUME, "team-a's")
    slave = await slave_at(tmp_path, "cpus:2;mem:1024;disk:1024")
    assert slave.kept == R("disk(team-a,ops):512")
    assert not base.exists()
    aside = list((tmp_path / "volumes" / "set-aside").glob("*/pg.*/base"))
    assert [p.read_text() for p in aside] == ["team-a's"]
