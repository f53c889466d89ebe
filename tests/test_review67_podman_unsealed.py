"""Review 67: a principal's group and the slave's parent are sealed (others pass them,
never list them: Cgroups.seal) in the hierarchies the slave limits in. An image task's
podman makes the task's path in every other hierarchy of the host too (blkio, devices,
freezer, cpuset, systemd...), after the seal, with mode 0755: there any tenant's task
lists the slave's groups (whose principals run here) and each group's containers
(`t.<framework>.<task>`: another tenant's framework and task ids). Here, one image
task's `sleep 300`: nobody (uid 65534) listed the slave's parent and the group in 6
hierarchies (blkio, cpuset, devices, freezer, systemd, unified), 12
listings naming `~p.` and `t.<fw>.boxed`."""

from __future__ import annotations

import asyncio
import subprocess

from protocol.wire.messages import TaskState
from protocol.wire.resources import Resources
from slave.isolator import PARENT, container_name, group_name

from harness.cgroups import ROOT, cgroup_path, cgroups_slave, destroy_cgroups, kill_task
from harness.helpers import eventually
from harness.images import image  # noqa: F401  (the fixture: podman holds IMAGE)
from harness.slave import Rig
from harness.slave import rig as rig


async def test_an_image_tasks_group_and_parent_are_listable_by_no_one_in_any_hierarchy(
    rig: Rig,
    image: str,  # noqa: F811  (the fixture)
) -> None:
    fw, sid, _ = await cgroups_slave(rig)
    try:
        await rig.launch(
            fw, "echo up; sleep 300", "boxed", Resources(cpus=0.5, mem=64), image=image
        )
        await fw.update_for("boxed", TaskState.RUNNING, timeout=60)
        name = container_name(fw.framework_id, "boxed")
        group = f"{PARENT}/{sid}/{group_name('')}"
        task = ROOT / "devices" / group / name
        await eventually(lambda: any(task.glob("libpod-*")), timeout=30)  # podman's, there
        listed = await asyncio.to_thread(_listed_by_nobody, [f"{PARENT}/{sid}", group])
        assert listed == {}, listed  # (others may pass, never list: as in cpu, memory, pids)
        await kill_task(fw, "boxed")
        await fw.update_for("boxed", TaskState.KILLED, timeout=30)
        await eventually(lambda: not cgroup_path(sid, name).exists(), timeout=30)
    finally:
        destroy_cgroups(sid)


def _listed_by_nobody(paths: list[str]) -> dict[str, list[str]]:
    """The cgroups a user of no task here (nobody, as any tenant's task) lists in each
    of `paths`, in each hierarchy of the host."""
    listed = {}
    for h in sorted(ROOT.iterdir()):
        for p in paths:
            if (h / p).is_dir():
                ls = subprocess.run(["ls", "-p", h / p], user=65534, capture_output=True, text=True)
                if ls.returncode == 0:
                    listed[f"{h.name}/{p}"] = [n for n in ls.stdout.split() if n.endswith("/")]
    return listed
