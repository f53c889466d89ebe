"""Isolation: the slave holds its tasks to their resources with cgroups (v1 here, for
real; v2 against a fake cgroupfs), and cleans up after them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from cluster.local.view import render_state
from master.authz import Caller
from master.http.metrics import exposition, registry_for
from protocol.tooling.brokers import MosquittoBroker
from protocol.wire.messages import (
    CommandInfo,
    ExecutorInfo,
    ExecutorUsage,
    Reason,
    TaskInfo,
    TaskState,
    TaskUsage,
    UsageReport,
)
from protocol.wire.resources import Resources
from slave.cgroups import CgroupsV1, CgroupsV2, Limits, detect
from slave.isolator import (
    PARENT,
    CgroupsIsolator,
    container_name,
    executor_container_name,
    groups_usage,
    make_isolator,
)

from harness.cgroups import (
    ROOT,
    cgroup_path,
    cgroups_slave,
    destroy_cgroups,
    kill_task,
    need_cgroups,
    new_slave_id,
    task_cgroup,
)
from harness.cgroups import rig as rig
from harness.helpers import eventually
from harness.slave import EXECUTOR, Rig, reap, slave_process

# -- v2 and v1 file writes, against a fake cgroupfs ------------------------------------------


def _fake_v2(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (root / "cgroup.subtree_control").write_text("")


def test_v2_writes_weight_cap_memory_swap_and_pids_and_enables_controllers(
    tmp_path: Path,
) -> None:
    _fake_v2(tmp_path)
    found = detect(tmp_path)
    assert isinstance(found, CgroupsV2)

    # the kernel makes these files in each new cgroup; the fake makes them as mkdir would
    original_mkdir = Path.mkdir

    def mkdir(self: Path, *a: object, **kw: object) -> None:
        original_mkdir(self, *a, **kw)  # type: ignore[arg-type]
        (self / "cgroup.controllers").write_text("cpu memory pids\n")
        (self / "memory.swap.max").write_text("max\n")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Path, "mkdir", mkdir)
        found.create("drfmesos/s1/fw.t", Limits(cpus=0.25, mem_mb=64, cfs=True, max_pids=50))
    task = tmp_path / "drfmesos" / "s1" / "fw.t"
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"
    assert (tmp_path / "drfmesos" / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"
    assert (task / "cpu.weight").read_text() == "25"
    assert (task / "cpu.max").read_text() == "25000 100000"
    assert (task / "memory.max").read_text() == str(64 * 2**20)
    assert (task / "memory.swap.max").read_text() == "0"
    assert (task / "pids.max").read_text() == "50"
    assert found.procs_files("drfmesos/s1/fw.t") == [task / "cgroup.procs"]

    # accounting and the OOM count, as the kernel writes them
    (task / "cpu.stat").write_text(
        "usage_usec 3500000\nuser_usec 3000000\nsystem_usec 500000\nthrottled_usec 1250000\n"
    )
    (task / "memory.current").write_text("1048576\n")
    (task / "memory.peak").write_text("67108864\n")
    (task / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n")
    usage = found.usage("drfmesos/s1/fw.t")
    assert (usage.cpu_user_seconds, usage.cpu_system_seconds) == (3.0, 0.5)
    assert usage.cpu_throttled_seconds == 1.25
    assert (usage.memory_bytes, usage.memory_peak_bytes) == (2**20, 64 * 2**20)
    assert found.oom_kills("drfmesos/s1/fw.t") == 1
    assert found.memory_limit("drfmesos/s1/fw.t") == 64 * 2**20
    container = CgroupsIsolator(found, "s1").adopt("fw.t")
    message = asyncio.run(container.limitation())
    assert message is not None
    assert "limit of 64 MB (peak 64 MB)" in message
    assert found.children("drfmesos/s1") == ["drfmesos/s1/fw.t"]


def test_v2_without_the_memory_controller_is_refused_with_the_reason(tmp_path: Path) -> None:
    tmp_path.joinpath("cgroup.controllers").write_text("cpu pids\n")
    assert detect(tmp_path) == f"cgroup v2 at {tmp_path} lacks the memory controller"
    isolator = make_isolator("auto", "s1", tmp_path)
    assert isolator.kind == "posix"  # auto falls back, with a warning
    with pytest.raises(ValueError, match="lacks the memory controller"):
        make_isolator("cgroups", "s1", tmp_path)


def test_v1_writes_shares_quota_and_memsw_in_each_hierarchy(tmp_path: Path) -> None:
    for controller in ("cpu", "cpuacct", "memory", "pids"):
        (tmp_path / controller).mkdir()
        (tmp_path / controller / "cgroup.procs").write_text("")
    (tmp_path / "memory" / "memory.memsw.limit_in_bytes").write_text("0")  # swap accounted
    found = detect(tmp_path)
    assert isinstance(found, CgroupsV1)
    name = "drfmesos/s1/fw.t"
    found.create(name, Limits(cpus=1.5, mem_mb=128, cfs=True, max_pids=7))
    assert (tmp_path / "cpu" / name / "cpu.shares").read_text() == "1536"
    assert (tmp_path / "cpu" / name / "cpu.cfs_quota_us").read_text() == "150000"
    assert (tmp_path / "memory" / name / "memory.limit_in_bytes").read_text() == str(128 << 20)
    assert (tmp_path / "memory" / name / "memory.memsw.limit_in_bytes").read_text() == str(
        128 << 20
    )
    assert (tmp_path / "pids" / name / "pids.max").read_text() == "7"
    assert [f.relative_to(tmp_path) for f in found.procs_files(name)] == [
        Path(c) / name / "tasks"
        for c in ("cpu", "cpuacct", "pids", "memory")  # memory last
    ]


async def test_the_slaves_parent_cgroup_weighs_as_many_cpus_as_the_slave_offers(
    tmp_path: Path,
) -> None:
    # under contention the slave's tasks together weigh its cpus, not one cpu's default
    for controller in ("cpu", "cpuacct", "memory"):
        (tmp_path / controller).mkdir()
        (tmp_path / controller / "cgroup.procs").write_text("")
    found = detect(tmp_path, pids=False)
    assert isinstance(found, CgroupsV1)
    isolator = CgroupsIsolator(found, "s1", cpus=3)
    await isolator.prepare("fw.t", Resources(cpus=0.5, mem=64))
    cpu = tmp_path / "cpu" / PARENT
    assert (cpu / "cpu.shares").read_text() == str(1024 * (os.cpu_count() or 1))
    assert (cpu / "s1" / "cpu.shares").read_text() == "3072"
    assert (cpu / "s1" / "~p." / "cpu.shares").read_text() == "512"  # (its principal's)
    assert (cpu / "s1" / "~p." / "fw.t" / "cpu.shares").read_text() == "512"
    assert not (tmp_path / "memory" / PARENT / "s1" / "memory.limit_in_bytes").exists()


def test_posix_usage_reads_the_process_group_from_proc() -> None:
    usage = groups_usage({os.getpgid(0)})[os.getpgid(0)]
    assert usage.memory_bytes > 0
    assert usage.cpu_user_seconds + usage.cpu_system_seconds > 0


# -- real cgroups, real tasks ----------------------------------------------------------------


def _cgroups_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return ""


@pytest.mark.timing  # CPU use over a window
async def test_a_cfs_capped_task_spinning_two_processes_stays_under_its_cpus(rig: Rig) -> None:
    fw = await rig.framework()
    sid = new_slave_id()
    slave = await rig.start_slave(
        sid, Resources(cpus=2, mem=512), isolation="cgroups", cgroups_enable_cfs=True
    )
    spin = f"{sys.executable} -c 'while True: pass'"
    await rig.launch(fw, f"{spin} & {spin} & wait", "spin", Resources(cpus=0.25, mem=64))
    await fw.update_for("spin", TaskState.RUNNING)
    container = slave.tasks[(fw.framework_id, "spin")].runner.container
    cgroups = slave.isolator.cgroups
    await eventually(lambda: len(cgroups.pids(container.path)) >= 3)  # its shell, spinners
    before, t0 = cgroups.usage(container.path), time.monotonic()
    await asyncio.sleep(2.0)  # the window the CPU use is measured over
    after, t1 = cgroups.usage(container.path), time.monotonic()
    used = (after.cpu_user_seconds + after.cpu_system_seconds) - (
        before.cpu_user_seconds + before.cpu_system_seconds
    )
    assert used / (t1 - t0) <= 0.35, f"{used / (t1 - t0):.2f} CPU-s/s for 0.25 cpus"
    assert after.cpu_throttled_seconds > before.cpu_throttled_seconds


async def test_an_oom_kill_fails_only_that_task_with_the_memory_reason(rig: Rig) -> None:
    fw = await rig.framework()
    sid = new_slave_id()
    slave = await rig.start_slave(sid, Resources(cpus=2, mem=1024), isolation="cgroups")
    await rig.launch(fw, "sleep 300", "sibling", Resources(cpus=0.1, mem=64))
    await fw.update_for("sibling", TaskState.RUNNING)
    hog = f"{sys.executable} -c 'x = bytearray(300 * 2**20); import time; time.sleep(60)'"
    await rig.launch(fw, hog, "hog", Resources(cpus=0.1, mem=64))
    failed = await fw.update_for("hog", TaskState.FAILED, timeout=20)
    assert failed.reason == Reason.MEMORY_LIMIT
    assert "limit of 64 MB" in failed.message
    assert "peak" in failed.message
    sibling = slave.tasks[(fw.framework_id, "sibling")]
    assert sibling.state == TaskState.RUNNING
    os.kill(sibling.runner.pid, 0)  # alive (raises if not)
    await eventually(lambda: not cgroup_path(sid, container_name(fw.framework_id, "hog")).exists())


async def test_a_task_whose_child_is_oom_killed_is_failed_though_its_shell_lives(
    rig: Rig,
) -> None:
    fw = await rig.framework()
    sid = new_slave_id()
    await rig.start_slave(sid, Resources(cpus=2, mem=1024), isolation="cgroups", usage_interval=0.2)
    hog = f"{sys.executable} -c 'x = bytearray(300 * 2**20)'"
    await rig.launch(fw, f"{hog}; sleep 300", "survivor", Resources(cpus=0.1, mem=64))
    failed = await fw.update_for("survivor", TaskState.FAILED, timeout=20)
    assert failed.reason == Reason.MEMORY_LIMIT
    assert "limit of 64 MB" in failed.message
    await eventually(
        lambda: not cgroup_path(sid, container_name(fw.framework_id, "survivor")).exists()
    )


async def test_a_double_fork_stays_in_the_cgroup_and_dies_with_its_task(rig: Rig) -> None:
    fw, sid, slave = await cgroups_slave(rig)
    # a daemon: forked twice, a session and process group of its own (killpg misses it)
    daemon = "sh -c 'setsid sleep 300 & echo $! > daemon.pid'; sleep 300"
    await rig.launch(fw, daemon, "d", Resources(cpus=0.1, mem=64))
    await fw.update_for("d", TaskState.RUNNING)
    pidfile = rig.tmp / sid / "sandboxes" / fw.framework_id / "d" / "daemon.pid"
    await eventually(lambda: pidfile.exists() and pidfile.read_text().strip() != "")
    pid = int(pidfile.read_text())
    name = task_cgroup(sid, container_name(fw.framework_id, "d"))
    assert f"memory:/{name}\n" in _cgroups_of(pid)
    assert f"cpu:/{name}\n" in _cgroups_of(pid)
    # (the pid file is written before the child's setsid has run: wait for it to escape)
    await eventually(lambda: os.getpgid(pid) != slave.tasks[(fw.framework_id, "d")].runner.pid)
    await kill_task(fw, "d")
    await fw.update_for("d", TaskState.KILLED)
    await eventually(lambda: not os.path.exists(f"/proc/{pid}"))
    await eventually(lambda: not cgroup_path(sid, container_name(fw.framework_id, "d")).exists())


async def test_a_finished_tasks_cgroup_is_removed(rig: Rig) -> None:
    fw, sid, _ = await cgroups_slave(rig)
    await rig.launch(fw, "sleep 0.2 & true", "short", Resources(cpus=0.1, mem=64))
    await fw.update_for("short", TaskState.FINISHED)
    await eventually(
        lambda: not cgroup_path(sid, container_name(fw.framework_id, "short")).exists()
    )
    for controller in ("cpu", "cpuacct", "pids"):
        assert not (
            ROOT / controller / task_cgroup(sid, container_name(fw.framework_id, "short"))
        ).exists()


async def test_a_slave_killed_keeps_its_live_tasks_cgroup_and_cleans_stale_ones(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    need_cgroups()
    work = tmp_path / "slave"
    async with contextlib.AsyncExitStack() as stack:
        rig = Rig(mosquitto, tmp_path, stack)
        await rig.start_master()
        fw = await rig.framework()
        proc = await _cgroups_slave(mosquitto, work)
        stack.push_async_callback(reap, proc)
        await rig.launch(fw, "sleep 300", "long", Resources(cpus=0.5, mem=64))
        await fw.update_for("long", TaskState.RUNNING)
        sid = (work / "slave_id").read_text().strip()
        stack.callback(destroy_cgroups, sid)  # whatever a failed run would leave
        live = cgroup_path(sid, container_name(fw.framework_id, "long"))
        assert live.exists()
        # a cgroup no task of the journal owns (its slave died while making it), with a
        # process in it
        stale = task_cgroup(sid, container_name(fw.framework_id, "lost"))
        for controller in ("cpu", "cpuacct", "memory", "pids"):
            (ROOT / controller / stale).mkdir(parents=True)
        orphan = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", f"echo $$ > {ROOT / 'memory' / stale / 'cgroup.procs'}; exec sleep 300"
        )
        await eventually(
            lambda: str(orphan.pid) in (ROOT / "memory" / stale / "cgroup.procs").read_text()
        )
        proc.send_signal(signal.SIGKILL)
        await proc.wait()

        proc2 = await _cgroups_slave(mosquitto, work)
        stack.push_async_callback(reap, proc2)
        await orphan.wait()  # killed by the restarted slave's recovery
        await eventually(lambda: not (ROOT / "memory" / stale).exists(), timeout=15)
        assert not (ROOT / "cpu" / stale).exists()
        assert not (ROOT / "pids" / stale).exists()  # a hierarchy this slave does not use
        assert live.exists()  # the recovered task keeps its cgroup
        await kill_task(fw, "long")
        await fw.update_for("long", TaskState.KILLED, timeout=15)
        await eventually(lambda: not live.exists())
        # nothing is left but its principal's group, empty (kept a while for its next
        # launch)
        group = live.parent
        assert [p for p in cgroup_path(sid).iterdir() if p.is_dir()] in ([], [group])
        assert not group.exists() or not [p for p in group.iterdir() if p.is_dir()]


async def _cgroups_slave(broker: MosquittoBroker, work: Path) -> asyncio.subprocess.Process:
    return await slave_process(broker, work, "--isolation", "cgroups")


async def test_usage_reaches_the_masters_task_view_and_metrics(rig: Rig) -> None:
    fw = await rig.framework()
    sid = new_slave_id()
    await rig.start_slave(sid, Resources(cpus=2, mem=512), isolation="cgroups", usage_interval=0.1)
    alloc = f"{sys.executable} -c 'x = bytearray(20 * 2**20); import time; time.sleep(300)'"
    await rig.launch(fw, alloc, "busy", Resources(cpus=0.5, mem=128))
    await fw.update_for("busy", TaskState.RUNNING)

    def usage() -> TaskUsage | None:
        views, _ = rig.master.views.task_views(fw.framework_id, None)
        return views[0].usage

    # the 20 MB are touched once the interpreter is up
    await eventually(lambda: (u := usage()) is not None and u.memory_bytes > 20 * 2**20)
    u = usage()
    assert u is not None
    assert u.cpu_user_seconds + u.cpu_system_seconds > 0
    assert u.memory_peak_bytes >= u.memory_bytes
    text = exposition(registry_for(rig.master.views)).decode()
    fid, where = f'framework_id="{fw.framework_id}"', f'slave_id="{sid}",task_id="busy"'
    assert f'drfmesos_task_cpu_seconds_total{{{fid},mode="user",{where}}}' in text
    labels = f"{fid},{where}"
    assert f"drfmesos_task_memory_bytes{{{labels}}}" in text


async def test_state_shows_each_tasks_and_slaves_use_beside_their_allocation(rig: Rig) -> None:
    fw = await rig.framework()
    sid = new_slave_id()
    slave = await rig.start_slave(
        sid,
        Resources(cpus=2, mem=512),
        isolation="cgroups",
        cgroups_enable_cfs=True,
        usage_interval=0.3,
    )
    spin = f"{sys.executable} -c 'while True: pass'"
    await rig.launch(fw, spin, "spin", Resources(cpus=0.25, mem=64))
    await fw.update_for("spin", TaskState.RUNNING)

    def task_used() -> Resources | None:
        views, _ = rig.master.views.task_views(fw.framework_id, None)
        return views[0].used

    # two reports make a rate; the spinner is held to its 0.25 cpus by its CFS quota
    await eventually(lambda: (u := task_used()) is not None and (u.get("cpus") or 0) > 0.1)
    used = task_used()
    assert used is not None
    assert 0.1 < (used.get("cpus") or 0) <= 0.35
    assert 1 < (used.get("mem") or 0) < 64
    state = rig.master.views.state()
    view = next(s for s in state.slaves if s.slave_id == sid)
    assert view.used is not None
    assert (view.used.get("cpus") or 0) > 0.1
    console = Console(record=True, width=200)
    console.print(render_state(state))
    text = console.export_text()
    assert "used / allocated" in text
    row = next(line for line in text.splitlines() if "spin" in line and sid in line)
    assert "/0.25 cpus" in row
    assert "/64 MB" in row
    assert slave.tasks[(fw.framework_id, "spin")].state == TaskState.RUNNING


async def test_a_slave_reports_usage_of_its_own_tasks_only(rig: Rig) -> None:
    fw = await rig.framework()
    await rig.start_slave(new_slave_id(), Resources(cpus=1, mem=256), isolation="posix")
    await rig.launch(fw, "sleep 300", "mine", Resources(cpus=0.5, mem=64))
    await fw.update_for("mine", TaskState.RUNNING)
    other = await rig.start_slave(new_slave_id(), Resources(cpus=1, mem=256), usage_interval=3600)
    lie = UsageReport(
        slave_id=other.slave_id,
        tasks=[TaskUsage(framework_id=fw.framework_id, task_id="mine", memory_bytes=1)],
    )
    await rig.master.slave_calls.on_usage_report(lie, Caller("slave", "slave", None))
    views, _ = rig.master.views.task_views(fw.framework_id, None)
    assert views[0].usage is None or views[0].usage.memory_bytes != 1


def test_container_names_are_safe_for_cgroupfs_and_the_joining_shell() -> None:
    assert container_name("fw-1", "task.2") == "t.fw-1.task_2e2"
    spaced, underscored = container_name("fw", "a b"), container_name("fw", "a_b")
    assert spaced == "t.fw.a_20b"
    assert spaced != underscored  # escaped characters do not make two names one
    assert "/" not in container_name("fw", "x/y")
    assert " " not in container_name("fw", "x y")
    assert "~" not in container_name("fw", "~spare-1")  # (upkeep's spares hold one)
    long = container_name("f" * 200, "t" * 200)
    assert len(long) <= 200
    assert long != container_name("f" * 200, "t" * 199)


def test_container_names_of_two_frameworks_never_meet() -> None:
    """A framework called `<alice's id>.alice` (the master let it through) names no
    container of alice's: not her task `alice`'s, nor her executor `alice`'s."""
    alice = "fw-0123"
    names = {
        container_name(alice, "alice"),
        executor_container_name(alice, "alice"),
        container_name(f"{alice}.alice", "t1"),
        container_name(f"{alice}.executor-alice", "t1"),
        executor_container_name(f"{alice}.alice", "e"),
        container_name(alice, "executor-alice"),  # (a task named as an executor's was)
        container_name(alice, "alice.t1"),
    }
    assert len(names) == 7


def executor_task(slave_id: str, task_id: str, seconds: float) -> TaskInfo:
    return TaskInfo(
        task_id=task_id,
        slave_id=slave_id,
        resources=Resources(cpus=0.25, mem=32),
        executor=ExecutorInfo(
            executor_id="sleeper",
            command=CommandInfo(value=EXECUTOR),
            resources=Resources(cpus=0.1, mem=96),
        ),
        data=json.dumps({"duration": seconds}).encode(),
    )


async def test_a_custom_executor_and_its_tasks_share_one_cgroup_that_grows_and_shrinks(
    rig: Rig,
) -> None:
    fw = await rig.framework()
    sid = new_slave_id()
    slave = await rig.start_slave(sid, Resources(cpus=2, mem=1024), isolation="cgroups")
    offer = await fw.next_offer()
    await fw.accept(offer, [executor_task(sid, "one", 300)], refuse=0)
    await fw.update_for("one", TaskState.RUNNING, timeout=30)
    executor = slave.executors[(fw.framework_id, "sleeper")]
    name = executor_container_name(fw.framework_id, "sleeper")
    assert executor.pid is not None
    assert f"memory:/{task_cgroup(sid, name)}\n" in _cgroups_of(executor.pid)
    limit = cgroup_path(sid, name) / "memory.limit_in_bytes"
    assert int(limit.read_text()) == 128 * 2**20  # the executor's 96 MB and its task's 32
    offer = await fw.next_offer(after=1)
    await fw.accept(offer, [executor_task(sid, "two", 300)], refuse=0)
    await fw.update_for("two", TaskState.RUNNING, timeout=30)
    assert int(limit.read_text()) == 160 * 2**20  # grown by the second task
    shares = ROOT / "cpu" / task_cgroup(sid, name) / "cpu.shares"
    assert int(shares.read_text()) == round(1024 * 0.6)
    await kill_task(fw, "one")
    await fw.update_for("one", TaskState.KILLED, timeout=30)
    # shrunk as it ended: the executor and the task it still runs
    await eventually(lambda: int(limit.read_text()) == 128 * 2**20)
    assert int(shares.read_text()) == round(1024 * 0.35)
    await kill_task(fw, "two")
    await fw.update_for("two", TaskState.KILLED, timeout=30)


async def test_a_custom_executors_use_is_reported_and_counted_on_its_slave(rig: Rig) -> None:
    """The demo's tasks run under custom executors: their slave's used is the executor's
    container's (it and its tasks, as Mesos's /monitor/statistics has it); another slave
    naming that executor is not heard."""
    fw = await rig.framework()
    sid = new_slave_id()
    await rig.start_slave(sid, Resources(cpus=2, mem=1024), isolation="cgroups", usage_interval=0.3)
    offer = await fw.next_offer()
    await fw.accept(offer, [executor_task(sid, "one", 300)], refuse=0)
    await fw.update_for("one", TaskState.RUNNING, timeout=30)

    def slave_used(slave_id: str) -> Resources | None:
        return next(s for s in rig.master.views.state().slaves if s.slave_id == slave_id).used

    # an interpreter's worth of memory (the executor is Python), within its 128 MB
    await eventually(lambda: (u := slave_used(sid)) is not None and (u.get("mem") or 0) > 5)
    used = slave_used(sid)
    assert used is not None
    assert (used.get("mem") or 0) < 128
    other = await rig.start_slave(new_slave_id(), Resources(cpus=1, mem=256), usage_interval=3600)
    lie = UsageReport(
        slave_id=other.slave_id,
        executors=[
            ExecutorUsage(framework_id=fw.framework_id, executor_id="sleeper", memory_bytes=2**30)
        ],
    )
    await rig.master.slave_calls.on_usage_report(lie, Caller("slave", "slave", None))
    assert slave_used(other.slave_id) is None  # (nothing of it heard)
    await kill_task(fw, "one")
    await fw.update_for("one", TaskState.KILLED, timeout=30)


async def test_max_task_pids_limits_the_processes_of_a_task(rig: Rig) -> None:
    fw = await rig.framework()
    sid = new_slave_id()
    slave = await rig.start_slave(
        sid, Resources(cpus=2, mem=512), isolation="cgroups", max_task_pids=8
    )
    # more children than it may have: the forks beyond the limit fail
    forks = "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do sleep 300 & done; sleep 300"
    await rig.launch(fw, forks, "forky", Resources(cpus=0.1, mem=64))
    await fw.update_for("forky", TaskState.RUNNING)
    name = task_cgroup(sid, container_name(fw.framework_id, "forky"))
    assert (ROOT / "pids" / name / "pids.max").read_text().strip() == "8"
    stderr = rig.tmp / sid / "sandboxes" / fw.framework_id / "forky" / "stderr"
    await eventually(lambda: stderr.exists() and "fork" in stderr.read_text().lower())
    assert len(slave.isolator.cgroups.pids(name)) <= 8


# -- a real cgroup v2 hierarchy (this host: beside the v1 ones) ------------------------------


@pytest.fixture
def cgroup2(tmp_path: Path) -> Iterator[Path]:
    """A cgroup2 mount of our own (the unified hierarchy; on a v1 host, the one its empty
    cgroup2 mount shows), unmounted at the end."""
    if os.geteuid() != 0:
        pytest.skip("mounting cgroup2 needs root")
    root = tmp_path / "cgroup2"
    root.mkdir()
    done = subprocess.run(["mount", "-t", "cgroup2", "none", str(root)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount cgroup2 here: {done.stderr.decode().strip()}")
    try:
        yield root
    finally:
        subprocess.run(["umount", str(root)], capture_output=True)


async def test_a_real_v2_cgroup_holds_a_task_with_its_double_fork_and_is_cleaned(
    cgroup2: Path,
) -> None:
    """What v2 does whatever controllers it has: joining before exec, a double fork
    staying in, CPU accounting (cpu.stat is v2's own), cgroup.kill, removal."""
    isolator = CgroupsIsolator(CgroupsV2(cgroup2), new_slave_id())
    container = await isolator.prepare("fw.t", Resources(cpus=0.5, mem=64))
    join, env = container.join()
    # a daemon (forked twice, a session of its own), then some CPU, then a wait
    daemon = (
        "sh -c 'setsid sleep 300 & echo $! > daemon.pid'; "
        "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 300"
    )
    proc = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", join + daemon, env={**os.environ, **env}, cwd=cgroup2.parent
    )
    try:
        pidfile = cgroup2.parent / "daemon.pid"
        await eventually(lambda: pidfile.exists() and pidfile.read_text().strip() != "")
        name = f"{isolator.parent}/~p./fw.t"  # (nobody's group: no principal named)
        for pid in (proc.pid, int(pidfile.read_text())):
            assert f"0::/{name}\n" in _cgroups_of(pid)
        cgroups = isolator.cgroups
        await eventually(lambda: cgroups.usage(name).cpu_user_seconds > 0)
        assert int(pidfile.read_text()) in cgroups.pids(name)
        await container.destroy()  # cgroup.kill: the daemon too
        await proc.wait()
        await eventually(lambda: not os.path.exists(f"/proc/{int(pidfile.read_text())}"))
        await eventually(lambda: not (cgroup2 / name).exists())
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await isolator.close()
    assert not (cgroup2 / isolator.parent).exists()


async def test_a_real_v2_cgroup_enforces_memory_and_cpu(cgroup2: Path) -> None:
    available = set((cgroup2 / "cgroup.controllers").read_text().split())
    if not {"cpu", "memory"} <= available:
        bound = sorted({"cpu", "memory"} - available)
        pytest.skip(
            f"cgroup v2 here offers only {sorted(available) or 'no'} controllers: "
            f"{', '.join(bound)} are bound to the v1 hierarchies under /sys/fs/cgroup, and "
            "the kernel gives a controller to one hierarchy at a time"
        )
    isolator = make_isolator("cgroups", new_slave_id(), cgroup2, cfs=True)
    assert isinstance(isolator, CgroupsIsolator)
    container = await isolator.prepare("fw.hog", Resources(cpus=0.25, mem=64))
    path = cgroup2 / isolator.parent / "~p." / "fw.hog"
    assert (path / "cpu.max").read_text().split() == ["25000", "100000"]
    assert (path / "memory.max").read_text().strip() == str(64 * 2**20)
    join, env = container.join()
    hog = f"{sys.executable} -c 'x = bytearray(300 * 2**20)'"
    proc = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", join + hog, env={**os.environ, **env}
    )
    await proc.wait()
    assert proc.returncode != 0
    message = await container.limitation()
    assert message is not None
    assert "limit of 64 MB" in message
    await container.destroy()
    await isolator.close()


def test_the_task_loops_ratio_holds_only_if_all_its_95pct_interval_is_above_the_bound() -> None:
    from benchmarks.isolation import Ratio

    # 12 pairs: the median lies between the 3rd smallest and the 3rd largest (96%)
    sure = Ratio.of([0.84, 0.86, 0.88, 0.9, 0.9, 0.91, 0.92, 0.93, 0.95, 0.96, 0.98, 1.3])
    assert (sure.low, sure.high, sure.median) == (0.88, 0.96, 0.915)
    assert sure.holds(0.8) == "yes"
    # the same median, one low pair more among the smallest three: not sure any more
    unsure = Ratio.of([0.3, 0.4, 0.5, 0.9, 0.9, 0.91, 0.92, 0.93, 0.95, 0.96, 0.98, 1.3])
    assert unsure.median == sure.median
    assert unsure.holds(0.8).startswith("NO (undecided")
    assert Ratio.of([0.5] * 6).holds(0.8) == "NO"
    with pytest.raises(ValueError, match="6 at least"):
        Ratio.of([0.9] * 5)
