"""Persistent volumes with real processes: a task of team-a writes to a volume made on its
reserved disk, ends; the slave restarts; a later task of team-a is offered the volume
again and reads the file. The volume is its task's user's alone (0700), outside every
sandbox, and DESTROY removes it. A shared volume is used by two tasks at once."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.tooling.brokers import MosquittoBroker
from protocol.wire.messages import (
    Accept,
    CommandInfo,
    ContainerInfo,
    Filters,
    Offer,
    OfferOperation,
    TaskInfo,
    TaskState,
)
from protocol.wire.resources import Resources
from protocol.wire.values import FrameworkCapability

from harness.fakes import FakeFramework, operate
from harness.helpers import eventually, need_root
from harness.images import image  # noqa: F401  (the fixture: podman holds IMAGE)
from harness.reservations import framework, master, offer_with, slave

R = Resources.parse
VOLUME = "disk(team-a)[db:data]"


@pytest.fixture
def base() -> Iterator[Path]:
    """A work dir's parent any user may pass (as an operator puts it): tasks run as
    their principal's user."""
    need_root()
    path = Path(tempfile.mkdtemp(prefix="drfmesos-volumes-"))
    os.chmod(path, 0o711)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


REAL = {
    "simulated_tasks": False,
    "switch_user": True,
    "pid_namespace": True,
    "kill_grace": 1.0,
}


def task(
    offer_slave: str, task_id: str, command: str, volume: str = VOLUME, in_image: str | None = None
) -> TaskInfo:
    return TaskInfo(
        task_id=task_id,
        slave_id=offer_slave,
        resources=R(f"cpus:0.1;mem:32;{volume}:100"),
        command=CommandInfo(value=command),
        container=ContainerInfo(image=in_image) if in_image is not None else None,
    )


async def read_back(fw: FakeFramework, offer: Offer, base: Path) -> str:
    """What a task on `offer` finds in the volume's file (`data/f`)."""
    await fw.accept(offer, [task(offer.slave_id, "reader", "cat data/f")], refuse=0)
    await fw.update_for("reader", TaskState.FINISHED, timeout=30)
    sandbox = base / "s1" / "sandboxes" / fw.framework_id
    return (next(sandbox.glob("*reader*")) / "stdout").read_text()


async def test_a_volume_outlives_its_task_and_a_slave_restart(
    mosquitto: MosquittoBroker, base: Path
) -> None:
    resources = "cpus:2;mem:512;disk(team-a):100"
    settings = {**REAL, "task_uid_map": base / "task-uids.json"}
    kept = base / "s1" / "volumes" / "roles" / "team-a" / "db"
    async with master(mosquitto) as m, framework(mosquitto, "mine", "team-a") as mine:
        async with slave(mosquitto, base, resources, **settings):
            offer = await offer_with(mine, R("disk(team-a):100"), 0)
            seen = mine.offer_count()
            create = OfferOperation(type="CREATE", resources=R(f"{VOLUME}:100"))
            await operate(mine, offer, create)
            offer = await offer_with(mine, R(f"{VOLUME}:100"), seen)
            write = task(offer.slave_id, "writer", "echo kept > data/f && id -u > data/uid")
            await mine.accept(offer, [write], refuse=0)
            await mine.update_for("writer", TaskState.FINISHED, timeout=30)
            uid = int((kept / "uid").read_text())
            assert uid != 0  # its principal's user, not root
            mode = kept.stat()
            assert (mode.st_uid, stat.S_IMODE(mode.st_mode)) == (uid, 0o700)
            seen = mine.offer_count()
        async with slave(mosquitto, base, resources, **settings) as restarted:
            assert VOLUME in restarted.resources.total
            # (the offer made before the restart is rescinded: Mesos's master does so)
            offer = await offer_with(mine, R(f"{VOLUME}:100"), seen, master=m)
            seen = mine.offer_count()
            assert await read_back(mine, offer, base) == "kept\n"
            # DESTROY: its directory goes, the disk stays team-a's
            offer = await offer_with(mine, R(f"{VOLUME}:100"), seen)
            destroy = OfferOperation(type="DESTROY", resources=R(f"{VOLUME}:100"))
            seen = mine.offer_count()
            await operate(mine, offer, destroy)
            await offer_with(mine, R("disk(team-a):100"), seen)
            await eventually(lambda: not kept.exists())


async def test_a_grown_volume_keeps_its_data_and_size_across_a_slave_restart(
    mosquitto: MosquittoBroker, base: Path
) -> None:
    # Mesos's GrowVolume and ShrinkVolume, the agent's part: the task after the resize
    # reads what the one before wrote, and the slave keeps the new size (its checkpoint)
    resources = "cpus:2;mem:512;disk(team-a):100"
    settings = {**REAL, "task_uid_map": base / "task-uids.json"}
    async with master(mosquitto) as m, framework(mosquitto, "mine", "team-a") as mine:
        async with slave(mosquitto, base, resources, **settings):
            offer = await offer_with(mine, R("disk(team-a):100"), 0)
            seen = mine.offer_count()
            await operate(mine, offer, OfferOperation(type="CREATE", resources=R(f"{VOLUME}:60")))
            offer = await offer_with(mine, R(f"{VOLUME}:60"), seen)
            write = TaskInfo(
                task_id="writer",
                slave_id=offer.slave_id,
                resources=R(f"cpus:0.1;mem:32;{VOLUME}:60"),
                command=CommandInfo(value="echo kept > data/f"),
            )
            seen = mine.offer_count()
            await mine.accept(offer, [write], refuse=0)
            await mine.update_for("writer", TaskState.FINISHED, timeout=30)
            more = R("disk(team-a):40")  # (an offer of the volume and the disk to grow it by:
            # the writer's end may come back alone while the rest is in another offer)
            offer = await offer_with(mine, R(f"{VOLUME}:60") + more, seen)
            seen = mine.offer_count()
            grow = OfferOperation(type="GROW_VOLUME", resources=R(f"{VOLUME}:60"), addition=more)
            await operate(mine, offer, grow)
            await offer_with(mine, R(f"{VOLUME}:100"), seen)
            seen = mine.offer_count()
        async with slave(mosquitto, base, resources, **settings) as restarted:
            assert restarted.resources.total[VOLUME] == 100
            offer = await offer_with(mine, R(f"{VOLUME}:100"), seen, master=m)
            seen = mine.offer_count()
            assert await read_back(mine, offer, base) == "kept\n"
            # and back: the disk it gives up stays team-a's
            offer = await offer_with(mine, R(f"{VOLUME}:100"), seen)
            seen = mine.offer_count()
            shrink = OfferOperation(type="SHRINK_VOLUME", resources=R(f"{VOLUME}:100"), subtract=40)
            await operate(mine, offer, shrink)
            await offer_with(mine, R(f"{VOLUME}:60;disk(team-a):40"), seen)
            await eventually(lambda: restarted.resources.kept == R(f"{VOLUME}:60"))


SHARED = "disk(team-a)[db:data]<SHARED>"


async def test_two_tasks_share_one_volume(mosquitto: MosquittoBroker, base: Path) -> None:
    """Mesos's SharedPersistentVolumeMultipleTasks on a real slave: one launch makes a
    shared volume and runs two tasks on it; each writes its file and waits for the
    other's, so both use the one directory at once, and each reads what the other wrote."""
    resources = "cpus:2;mem:512;disk(team-a):100"
    settings = {**REAL, "task_uid_map": base / "task-uids.json"}
    kept = base / "s1" / "volumes" / "roles" / "team-a" / "db"
    capable = {"capabilities": [FrameworkCapability.SHARED_RESOURCES]}
    async with (
        master(mosquitto),
        framework(mosquitto, "mine", "team-a", **capable) as mine,
        slave(mosquitto, base, resources, **settings),
    ):
        offer = await offer_with(mine, R("disk(team-a):100"), 0)
        wait = "for i in $(seq 200); do [ -f data/{0} ] && break; sleep 0.05; done; cat data/{0}"
        one = task(offer.slave_id, "one", "echo one > data/one && " + wait.format("two"), SHARED)
        two = task(offer.slave_id, "two", "echo two > data/two && " + wait.format("one"), SHARED)
        create = OfferOperation(type="CREATE", resources=R(f"{SHARED}:100"))
        await mine.bus.publish(
            mine.to_master,
            Accept(
                framework_id=mine.framework_id,
                offer_ids=[offer.offer_id],
                operations=[create],
                tasks=[one, two],
                filters=Filters(refuse_seconds=0),
            ),
        )
        for t in ("one", "two"):
            await mine.update_for(t, TaskState.FINISHED, timeout=30)
        sandboxes = base / "s1" / "sandboxes" / mine.framework_id
        read = {t: (next(sandboxes.glob(f"*{t}*")) / "stdout").read_text() for t in ("one", "two")}
        assert read == {"one": "two\n", "two": "one\n"}  # each saw the other's file
        assert sorted(p.name for p in kept.iterdir()) == ["one", "two"]  # one directory
        assert stat.S_IMODE(kept.stat().st_mode) == 0o700  # its tasks' user's alone


async def test_a_task_in_an_image_has_its_volume_at_its_place(
    mosquitto: MosquittoBroker,
    base: Path,
    image: str,  # noqa: F811  (the fixture)
) -> None:
    """A task in a container image writes to its volume, at its place under the sandbox
    inside the container; the volume keeps it for a command task after it, and is its
    principal's user's alone."""
    resources = "cpus:2;mem:512;disk(team-a):100"
    settings = {**REAL, "task_uid_map": base / "task-uids.json", "isolation": "cgroups"}
    kept = base / "s1" / "volumes" / "roles" / "team-a" / "nested"
    nested = "disk(team-a)[nested:deep/data]"
    async with (
        master(mosquitto),
        framework(mosquitto, "mine", "team-a") as mine,
        slave(mosquitto, base, resources, **settings),
    ):
        offer = await offer_with(mine, R("disk(team-a):100"), 0)
        seen = mine.offer_count()
        await operate(mine, offer, OfferOperation(type="CREATE", resources=R(f"{nested}:100")))
        offer = await offer_with(mine, R(f"{nested}:100"), seen)
        boxed = "echo kept > deep/data/f && cat /proc/self/mountinfo"
        write = task(offer.slave_id, "boxed", boxed, nested, in_image=image)
        seen = mine.offer_count()
        await mine.accept(offer, [write], refuse=0)
        await mine.update_for("boxed", TaskState.FINISHED, timeout=60)
        assert (kept / "f").read_text() == "kept\n"  # written in the volume, not the sandbox
        sandbox = base / "s1" / "sandboxes" / mine.framework_id
        mounts = (next(sandbox.glob("*boxed*")) / "stdout").read_text()
        assert " /mnt/mesos/sandbox/deep/data " in mounts
        owner = kept.stat()
        assert owner.st_uid != 0
        assert stat.S_IMODE(owner.st_mode) == 0o700
        assert (kept / "f").stat().st_uid == owner.st_uid  # written as its user
        offer = await offer_with(mine, R(f"{nested}:100"), seen)
        await mine.accept(
            offer, [task(offer.slave_id, "reader", "cat deep/data/f", nested)], refuse=0
        )
        await mine.update_for("reader", TaskState.FINISHED, timeout=30)
        assert (next(sandbox.glob("*reader*")) / "stdout").read_text() == "kept\n"
