"""Each principal's tasks are held together to what their shares of the slave are worth
(slave.principal_groups): its group's `pids.max` follows its tasks as they start, are
resized and end, and is written again from the recovered tasks after a slave restart,
whatever it held; its cpu weight is its tasks' cpus. Real cgroups (v1 here), and v2 on a
fake tree."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from protocol.wire.messages import TaskState
from protocol.wire.resources import Resources
from slave.cgroups import CgroupsV2, Limits, detect
from slave.isolator import PARENT, CgroupsIsolator, container_name, group_name
from slave.pid_shares import LEAST, PidShares, host_pids

from harness.cgroups import ROOT, need_cgroups, new_slave_id, task_cgroup
from harness.helpers import eventually
from harness.shared_slave import ALICE, MALLORY, shared_slave

SLAVE = Resources(cpus=4, mem=8192)
TINY = Resources(cpus=0.01, mem=24)  # review 62's: a share of 0.003, worth 1.6 of 562 pids


def _read(path: Path) -> str:
    return path.read_text().strip()


async def test_a_principals_group_bound_follows_its_tasks_as_they_start_and_end() -> None:
    """Review 62's shapes on a 1,500-pid host: mallory's 72 tiny tasks are each given the
    floor of 16, but together what their shares are worth (118 of the budget's 562), not
    1,152; alice's task of 1 cpu and 1 GB keeps its 140 beside them."""
    need_cgroups()
    found = detect(ROOT)
    assert not isinstance(found, str)
    shares = PidShares(1500, SLAVE)
    isolator = CgroupsIsolator(found, new_slave_id(), pids=shares, cpus=4)
    pids, cpu = ROOT / "pids" / isolator.parent, ROOT / "cpu" / isolator.parent
    mallory, alice = group_name("mallory"), group_name("alice")
    try:
        tiny = [await isolator.prepare(f"t.m{i}", TINY, principal="mallory") for i in range(72)]
        big = await isolator.prepare("t.a", Resources(cpus=1, mem=1024), principal="alice")
        assert _read(pids / mallory / "t.m0" / "pids.max") == str(LEAST)
        assert _read(pids / mallory / "pids.max") == "118"  # int(562.5 x 72 x 24 / 8192)
        assert _read(cpu / mallory / "cpu.shares") == str(round(1024 * 0.72))
        assert _read(pids / alice / "pids.max") == "140" == _read(pids / alice / "t.a/pids.max")
        assert _read(cpu / alice / "cpu.shares") == "1024"
        assert _read(pids / "pids.max") == str(int(1500 * 3 / 4))  # (all of them, as before)

        for container in tiny[36:]:  # half of mallory's end: her group shrinks with them
            await container.destroy()
        assert _read(pids / mallory / "pids.max") == "59"  # int(562.5 x 36 x 24 / 8192)
        assert _read(cpu / mallory / "cpu.shares") == str(round(1024 * 0.36))
        again = await isolator.prepare("t.m99", TINY, principal="mallory")  # (and grows)
        assert _read(pids / mallory / "pids.max") == "60"
        for container in [*tiny[:36], again]:
            await container.destroy()
        assert _read(pids / alice / "pids.max") == "140"  # (alice's, untouched)
        # her last gone, mallory's group waits, empty, for her next launch (or goes)
        assert f"{isolator.parent}/{mallory}" in isolator.upkeep
        await big.destroy()
    finally:
        await isolator.close()
    assert not (ROOT / "memory" / isolator.parent).exists()  # (groups and spares gone)


async def test_an_executors_container_resized_stays_in_its_group_which_follows_it() -> None:
    need_cgroups()
    found = detect(ROOT)
    assert not isinstance(found, str)
    isolator = CgroupsIsolator(found, new_slave_id(), pids=PidShares(1500, SLAVE), cpus=4)
    group = ROOT / "pids" / isolator.parent / group_name("bob")
    try:
        executor = await isolator.prepare("e.x", Resources(cpus=1, mem=512), principal="bob")
        assert _read(group / "pids.max") == "140"  # (1 cpu of 4: a quarter of 562)
        await isolator.prepare("e.x", Resources(cpus=2, mem=512))  # (a task more: resized)
        assert _read(group / "pids.max") == "281"
        assert _read(group / "e.x" / "pids.max") == "281"
        await executor.destroy()
    finally:
        await isolator.close()


async def test_the_operators_fixed_bound_leaves_the_groups_unbounded() -> None:
    """`--max-task-pids N`: each task N, and no group bound (the operator's own sum);
    the group still weighs its tasks' cpus."""
    need_cgroups()
    found = detect(ROOT)
    assert not isinstance(found, str)
    fixed = PidShares(1500, SLAVE, fixed=8)
    isolator = CgroupsIsolator(found, new_slave_id(), pids=fixed, cpus=4)
    group = f"{isolator.parent}/{group_name('carol')}"
    try:
        task = await isolator.prepare("t.c", Resources(cpus=0.5, mem=64), principal="carol")
        assert _read(ROOT / "pids" / group / "t.c" / "pids.max") == "8"
        assert _read(ROOT / "pids" / group / "pids.max") == "max"
        assert _read(ROOT / "cpu" / group / "cpu.shares") == "512"
        await task.destroy()
    finally:
        await isolator.close()


def test_v2_enables_the_controllers_in_a_group_and_bounds_it(tmp_path: Path) -> None:
    """cgroup v2: the group is one level of the one tree, its controllers enabled for its
    containers (it holds no process itself: the no-internal-processes rule)."""
    tmp_path.joinpath("cgroup.controllers").write_text("cpu memory pids\n")
    tmp_path.joinpath("cgroup.subtree_control").write_text("")
    original_mkdir = Path.mkdir

    def mkdir(self: Path, *a: object, **kw: object) -> None:
        original_mkdir(self, *a, **kw)  # type: ignore[arg-type]
        (self / "cgroup.controllers").write_text("cpu memory pids\n")

    # (the isolator's group books and writes, and the containers made below: what its
    # `prepare` does, without the upkeep's thread on a fake tree)
    found = CgroupsV2(tmp_path)
    groups = CgroupsIsolator(found, "s1", pids=PidShares(1500, SLAVE), cpus=4).groups
    group_path = f"drfmesos/s1/{group_name('dave')}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Path, "mkdir", mkdir)
        for i in range(2):
            groups.join(f"{group_path}/t.{i}", Resources(cpus=1, mem=1024))
            groups.write(group_path)
            found.create(f"{group_path}/t.{i}", Limits(cpus=1, mem_mb=1024, max_pids=140))
    group = tmp_path / group_path
    assert _read(group / "cgroup.subtree_control") == "+cpu +memory +pids"
    assert _read(group / "pids.max") == "281"  # two quarters of 562
    assert _read(group / "cpu.weight") == "200"
    groups.leave(f"{group_path}/t.1")
    assert _read(group / "pids.max") == "140"
    assert _read(group / "cpu.weight") == "100"


async def test_after_a_restart_each_principals_group_is_bounded_by_its_recovered_tasks() -> None:
    """The slave stops with tasks running, and starts again on its work dir: the groups'
    bounds are written from the tasks it recovers, whatever they held meanwhile (here
    one raised by hand, as a slave killed between two writes might have left it), and
    follow them on."""
    async with shared_slave(isolation="cgroups", resources=SLAVE) as s:
        shares = PidShares(host_pids(), SLAVE)
        half = Resources(cpus=1, mem=1024)  # a quarter of the slave's cpus: 0.25
        waits = "while [ ! -e stop ]; do sleep 0.05; done"  # (until the test says)
        for i in range(3):
            await s.master.run("mallory", MALLORY, f"m{i}", waits, resources=half)
        await s.master.run("alice", ALICE, "a", "exec sleep 300", resources=TINY)
        for framework, task in [(MALLORY, "m0"), (MALLORY, "m1"), (MALLORY, "m2"), (ALICE, "a")]:
            await s.master.reaches(framework, task, TaskState.RUNNING)
        sid = s.slave.slave_id
        group = (
            ROOT
            / "pids"
            / os.path.dirname(task_cgroup(sid, container_name(MALLORY, "m0"), "mallory"))
        )
        alices = ROOT / "pids" / os.path.dirname(task_cgroup(sid, "x", "alice"))
        assert _read(group / "pids.max") == str(shares.of_principal(0.75))
        assert _read(alices / "pids.max") == str(shares.of_principal(shares.share(TINY)))

        assert s.bus is not None
        await s.slave.stop()  # (its tasks run on)
        await s.bus.close()
        (group / "pids.max").write_text("max")
        await s.start(s.slave.config)
        assert _read(group / "pids.max") == str(shares.of_principal(0.75))
        assert _read(alices / "pids.max") == str(shares.of_principal(shares.share(TINY)))

        (s.sandbox(MALLORY, "m2") / "stop").touch()  # (one of mallory's recovered ends)
        await s.master.ends(MALLORY, "m2")
        await eventually(lambda: _read(group / "pids.max") == str(shares.of_principal(0.5)))
        for i in range(2):
            (s.sandbox(MALLORY, f"m{i}") / "stop").touch()


async def test_recovery_keeps_recovered_cgroups_at_either_level_and_removes_the_rest() -> None:
    """A slave before the groups left its task right under its parent; this one's are in
    groups. Recovery keeps both, removes a group's spares and a group none of whose
    containers is kept, and bounds the kept group by its recovered task."""
    need_cgroups()
    found = detect(ROOT)
    assert not isinstance(found, str)
    shares = PidShares(1500, SLAVE)
    isolator = CgroupsIsolator(found, new_slave_id(), pids=shares, cpus=4)
    parent, x, y = isolator.parent, group_name("x"), group_name("y")
    made = [f"{parent}/t.legacy", f"{parent}/{x}/t.kept", f"{parent}/{x}/~spare-1"]
    made += [f"{parent}/{y}/t.stale"]
    for path in made:
        found.make_spare(path)  # (an empty cgroup, in each hierarchy)
    legacy = isolator.adopt("t.legacy")
    kept = isolator.adopt("t.kept", "x", Resources(cpus=2, mem=1024))
    try:
        stale = await isolator.recover({legacy.path, kept.path})
        assert stale == [f"{parent}/{x}/~spare-1", f"{parent}/{y}/t.stale", f"{parent}/{y}"]
        memory = ROOT / "memory"
        assert (memory / legacy.path).is_dir()
        assert (memory / kept.path).is_dir()
        assert not (memory / parent / y).exists()
        assert _read(ROOT / "pids" / parent / x / "pids.max") == "281"  # (2 cpus of 4)
        await legacy.destroy()
        await kept.destroy()
    finally:
        await isolator.close()
    assert not (ROOT / "memory" / parent).exists()


async def test_a_gone_slaves_empty_groups_are_swept_with_their_containers() -> None:
    need_cgroups()
    found = detect(ROOT)
    assert not isinstance(found, str)
    gone = f"{PARENT}/iso-gone-{new_slave_id()}"
    old = f"{gone}/{group_name('z')}/t.old"
    found.make_spare(old)
    then = time.time() - 3600
    for hierarchy in ("cpu", "cpuacct", "memory", "pids"):
        os.utime(ROOT / hierarchy / old, (then, then))
    isolator = CgroupsIsolator(found, new_slave_id())
    try:
        await isolator.recover(set())
        assert isolator._sweep is not None
        await isolator._sweep
    finally:
        await isolator.close()
    assert not (ROOT / "memory" / gone).exists()


async def test_a_tenant_can_neither_raise_its_groups_bound_nor_move_into_anothers() -> None:
    """mallory's task, as her user in its namespaces, tries her group's `pids.max` and her
    own cgroup's, joining her group itself (above her own bound) or alice's, making a
    cgroup in her group, and listing it: each is refused."""
    async with shared_slave(isolation="cgroups") as s:
        await s.master.run("alice", ALICE, "a1", "exec sleep 300")
        await s.master.reaches(ALICE, "a1", TaskState.RUNNING)
        pids = "/sys/fs/cgroup/pids"
        script = (
            "own=$(grep :pids: /proc/self/cgroup | cut -d: -f3); group=${own%/*}; "
            'alices="${group%/*}/' + group_name("alice") + '"; '
            'for f in "$group/pids.max" "$own/pids.max"; do '
            f'echo 100000 > "{pids}$f" 2>/dev/null && echo "wrote $f"; done; '
            f'echo $$ > "{pids}$group/tasks" 2>/dev/null && echo "joined its group"; '
            f'echo $$ > "{pids}$alices/tasks" 2>/dev/null && echo "joined alices"; '
            f'mkdir "{pids}$group/mine" 2>/dev/null && echo "made one"; '
            f'ls "{pids}$group" > /dev/null 2>&1 && echo "listed"; '
            f'test -e "{pids}$alices/tasks" && echo "alices is there"; echo checked'
        )
        await s.master.run("mallory", MALLORY, "m1", script)
        await s.master.ends(MALLORY, "m1")
        said = s.output(MALLORY, "m1")
        assert said.splitlines() == ["alices is there", "checked"], said  # (all refused)
