"""Real cgroups for the isolation tests: where they are, which a slave made, and cleaning
them away."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from protocol.tooling.brokers import MosquittoBroker
from protocol.wire.messages import (
    Kill,
)
from protocol.wire.resources import Resources
from slave.cgroups import detect
from slave.isolator import (
    PARENT,
    group_name,
)
from slave.slave import Slave

from harness.fakes import FakeFramework
from harness.slave import Rig, T

ROOT = Path("/sys/fs/cgroup")


def need_cgroups() -> None:
    """Outside CI a host without writable cgroups skips these; in CI that is a failure."""
    why = "not root" if os.geteuid() != 0 else detect(ROOT)
    if isinstance(why, str):
        if os.environ.get("CI"):
            pytest.fail(f"cgroups are needed in CI: {why}")
        pytest.skip(f"no writable cgroup hierarchy: {why}")


@pytest.fixture
async def rig(mosquitto: MosquittoBroker, tmp_path: Path) -> AsyncIterator[Rig]:
    need_cgroups()
    async with contextlib.AsyncExitStack() as stack:
        r = Rig(mosquitto, tmp_path, stack)
        await r.start_master()
        yield r


def new_slave_id() -> str:
    return f"iso-{uuid.uuid4().hex[:8]}"  # cgroups are machine-wide: a name of its own


async def cgroups_slave(rig: Rig) -> tuple[FakeFramework, str, Slave]:
    """A framework, then a slave of a new id (2 CPUs, 512 MB) under the cgroups isolator:
    the framework, the slave's id, and the slave."""
    fw = await rig.framework()
    sid = new_slave_id()
    slave = await rig.start_slave(sid, Resources(cpus=2, mem=512), isolation="cgroups")
    return fw, sid, slave


def task_cgroup(slave_id: str, name: str, principal: str = "") -> str:
    """A container's cgroup: in its principal's group (the rig's cluster is insecure: its
    tasks are nobody's, "")."""
    return f"{PARENT}/{slave_id}/{group_name(principal)}/{name}"


def cgroup_path(slave_id: str, name: str = "", principal: str = "") -> Path:
    """A container's memory cgroup, or the slave's parent's (no `name`)."""
    if not name:
        return ROOT / "memory" / PARENT / slave_id
    return ROOT / "memory" / task_cgroup(slave_id, name, principal)


async def kill_task(fw: FakeFramework, task_id: str) -> None:
    await fw.bus.publish(
        T.inbound("framework", "framework"), Kill(framework_id=fw.framework_id, task_id=task_id)
    )


def destroy_cgroups(slave_id: str) -> None:
    cgroups = detect(ROOT)
    assert not isinstance(cgroups, str)
    parent = f"{PARENT}/{slave_id}"
    for child in cgroups.children(parent):
        cgroups.destroy(child)
    cgroups.destroy(parent)
