"""A persistent volume at a nested place (`[v1:a/b]`) on a real slave as root, tasks as
their principal's user: the directories on the way are the task's user's once its
command runs (root's only while its first shell binds), its writes land where it asked,
and places that overlap are refused before anything is bound."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from protocol.wire.messages import CheckpointResources, TaskState
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.shared_slave import MALLORY, Shared, T, shared_slave

pytestmark = pytest.mark.timeout(120)


async def keep(s: Shared, *volumes: str) -> None:
    wanted = Resources({v: 16 for v in volumes})
    await s.master.bus.publish(
        T.slave("slave", s.master.slave_id),
        CheckpointResources(slave_id=s.master.slave_id, resources=wanted, version=1),
    )
    await eventually(lambda: all(v in s.slave.resources.total.millis for v in volumes))


async def launch(s: Shared, task_id: str, command: str, *volumes: str) -> None:
    resources = Resources(cpus=0.1, mem=64) + Resources({v: 16 for v in volumes})
    await s.master.run("mallory", MALLORY, task_id, command, resources=resources)


async def test_a_nested_place_is_the_tasks_users_beside_its_volume() -> None:
    v1, v2 = "disk(mallory,mallory)[v1:a/b/c]", "disk(mallory,mallory)[v2:a/d]"
    async with shared_slave(
        base_in="/var/lib", resources=Resources(cpus=2, mem=1024, disk=64)
    ) as s:
        await keep(s, v1, v2)
        script = "echo one > a/b/c/f && echo two > a/d/g && echo beside > a/b/h && id -u"
        await launch(s, "m1", script, v1, v2)
        assert (await s.master.ends(MALLORY, "m1")).state == TaskState.FINISHED
        uid = int(s.output(MALLORY, "m1").split()[-1])
        sandbox = s.sandbox(MALLORY, "m1")
        for way in ("a", "a/b"):
            assert os.lstat(sandbox / way).st_uid == uid, way  # handed back
        assert (sandbox / "a" / "b" / "h").read_text() == "beside\n"
        roles = s.work / "volumes" / "roles" / "mallory"
        assert (roles / "v1" / "f").read_text() == "one\n"  # (bound: in the volume)
        assert (roles / "v2" / "g").read_text() == "two\n"


async def test_a_volume_placed_inside_another_is_refused() -> None:
    v1, v2 = "disk(mallory,mallory)[v1:a]", "disk(mallory,mallory)[v2:a/b]"
    async with shared_slave(
        base_in="/var/lib", resources=Resources(cpus=2, mem=1024, disk=64)
    ) as s:
        await keep(s, v1, v2)
        await launch(s, "m1", "true", v1, v2)
        ended = await s.master.ends(MALLORY, "m1")
        assert ended.state == TaskState.FAILED
        assert "one lies in another's" in ended.message


def test_a_place_made_for_a_task_that_binds_nothing_is_its_users_all_the_way(
    tmp_path: Path,
) -> None:
    """An image's task binds nothing yet (its first shell is podman's): the directories on
    its volume's way are never held root's, left so for good."""
    from slave import volumes
    from slave.task_users import TaskUser

    me = TaskUser(os.getuid() + 1, os.getgid() + 1) if os.getuid() == 0 else None
    sandbox = tmp_path / "sandbox"
    binds = volumes.prepare(
        tmp_path / "work", sandbox, ["disk(a)[v:a/b]"], me, link=False, bound=False
    )
    assert binds.way == ()
    if me is not None:
        assert os.lstat(sandbox / "a").st_uid == me.uid
