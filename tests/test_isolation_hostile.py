"""A hostile tenant on a shared slave, second pass (after #45): what a security tester
did as `mallory` beside `alice` on root slaves with the default flags, each attack on
real processes under real users, real cgroups.

- root on the slave through the loader: a task's (or an executor's) `LD_PRELOAD` or
  `LD_AUDIT` ran its library in the root processes that start it (`unshare`, `setpriv`,
  root's `sh`), before the user switch;
- a descriptor to one of its own cgroups' `tasks` files, opened while the slave had
  handed them to its user, kept writing once the slave gave that cgroup to alice's task;
- `/tmp`, `/dev/shm` and System V IPC shared, and files made with umask 022.

The slave of these tests is the tenant isolation tests' (`harness.shared_slave`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from protocol.wire.messages import CommandInfo, ExecutorInfo, TaskState
from protocol.wire.resources import Resources
from slave.isolator import container_name

from harness.helpers import eventually
from harness.shared_slave import ALICE, MALLORY, Shared, shared_slave

# what every process the library is loaded into records: a file named after how it was
# loaded, its effective uid, its command and its pid (an empty file: no user's file
# permissions stand in the way of another's)
RECORDER = r"""
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

static void record(const char *how) {
    char comm[64] = "?";
    int f = open("/proc/self/comm", O_RDONLY);
    if (f >= 0) {
        ssize_t n = read(f, comm, sizeof comm - 1);
        comm[n > 0 ? n - 1 : 0] = 0;
        close(f);
    }
    char path[512];
    snprintf(path, sizeof path, "%s/%s.%d.%s.%d", SEEN, how, (int)geteuid(), comm,
             (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT, 0666);
    if (fd >= 0) close(fd);
}

__attribute__((constructor)) static void loaded(void) { record("preload"); }

unsigned int la_version(unsigned int version) {
    record("audit");
    return version;
}
"""


def recorder(base: Path) -> tuple[Path, Path]:
    """The library (compiled with the host's gcc), where any user may load it, and the
    directory where every process it is loaded into leaves its mark (sticky, writable
    by all)."""
    if shutil.which("gcc") is None:
        pytest.skip("no gcc to build the preloaded library")
    lib, seen = base / "lib", base / "seen"
    lib.mkdir(mode=0o755)
    seen.mkdir()
    os.chmod(lib, 0o755)
    os.chmod(seen, 0o1777)
    source = lib / "recorder.c"
    source.write_text(RECORDER)
    so = lib / "recorder.so"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", f'-DSEEN="{seen}"', "-o", str(so), str(source)], check=True
    )
    os.chmod(so, 0o755)
    return so, seen


def marks(seen: Path) -> list[tuple[str, int, str]]:
    """(how, euid, command) of every process the library was loaded into."""
    found = []
    for name in os.listdir(seen):
        how, euid, rest = name.split(".", 2)
        found.append((how, int(euid), rest.rsplit(".", 1)[0]))
    return found


def task_uid(s: Shared, principal: str) -> int:
    users = s.slave.tenancy.users
    assert users is not None
    user = users.known(principal)
    assert user is not None
    return user.uid


async def test_a_tasks_preloaded_library_never_runs_as_root_and_runs_in_the_task() -> None:
    """mallory's command task names its own library in LD_PRELOAD and LD_AUDIT: the
    loader runs it in the task's processes (the framework's right), as mallory's user,
    and in none of the root processes that start the task."""
    async with shared_slave() as s:
        so, seen = recorder(s.work.parent)
        env = {"LD_PRELOAD": str(so), "LD_AUDIT": str(so)}
        await s.master.run("mallory", MALLORY, "m1", "/bin/true && /bin/true", env=env)
        ended = await s.master.ends(MALLORY, "m1")
        assert ended.state == TaskState.FINISHED, ended.message
        found = marks(seen)
        assert [m for m in found if m[1] == 0] == []
        uid = task_uid(s, "mallory")
        assert ("preload", uid, "true") in found
        assert ("audit", uid, "true") in found


async def test_an_executors_preloaded_library_never_runs_as_root() -> None:
    """The same through a custom executor's environment (ExecutorInfo.command)."""
    async with shared_slave() as s:
        so, seen = recorder(s.work.parent)
        executor = ExecutorInfo(
            executor_id="preloading",
            command=CommandInfo(
                value="/bin/true; exec /bin/sleep 300",
                environment={"LD_PRELOAD": str(so), "LD_AUDIT": str(so)},
            ),
            resources=Resources(cpus=0.1, mem=32),
        )
        await s.master.run("mallory", MALLORY, "m1", "", executor=executor)
        await eventually(lambda: any(m[2] == "sleep" for m in marks(seen)), timeout=20)
        found, uid = marks(seen), task_uid(s, "mallory")
        assert [m for m in found if m[1] == 0] == []
        assert {("preload", uid, "sleep"), ("audit", uid, "sleep")} <= set(found)
        assert ("preload", uid, "true") in found  # (its command runs as `sh -c` does)


# -- /tmp, /dev/shm, System V IPC -------------------------------------------------------------

SECRET = "alice-tmp-secret-51c2"
OUTSIDE_TMP = "/var/lib"  # a work dir there, as an operator's: its tasks get a /tmp each
# the host's directories every user may write: each task has its own
SHARED_DIRS = [d for d in ("/tmp", "/var/tmp", "/run/lock") if os.path.isdir(d)]


async def test_a_tenants_task_reads_nothing_the_victim_left_in_tmp_or_shared_memory() -> None:
    """alice's task writes her secret to /tmp and /dev/shm by name and to its TMPDIR, and
    makes System V shared memory and a message queue; mallory's task reads /tmp and
    /dev/shm and lists IPC. A task's files are its user's alone (umask 077), its TMPDIR
    is in its sandbox, and its IPC namespace its own."""
    tag = f"drfmesos-test-{os.getpid()}"
    shared_files = [Path(f"/tmp/{tag}"), Path(f"/dev/shm/{tag}")]
    try:
        async with shared_slave() as s:
            await s.master.run(
                "alice",
                ALICE,
                "a1",
                f'for f in /tmp/{tag} /dev/shm/{tag} "$TMPDIR/{tag}"; do echo {SECRET} > $f; '
                "done; ipcmk -M 4096 -p 0644; ipcmk -Q -p 0644; umask; echo ready; "
                "exec sleep 300",
            )
            await s.master.reaches(ALICE, "a1", TaskState.RUNNING)
            await eventually(lambda: "ready" in said(s, ALICE, "a1"))
            alices = s.output(ALICE, "a1")
            assert "0077" in alices.split()
            assert "Shared memory id:" in alices  # (ipcmk made them, in her namespace)
            await s.master.run(
                "mallory",
                MALLORY,
                "m1",
                f"cat /tmp/{tag} /dev/shm/{tag} /tmp/*/{tag}; echo IPC; ipcs -m -q; true",
            )
            await s.master.ends(MALLORY, "m1")
            sandbox = s.sandbox(MALLORY, "m1")
            seen = (sandbox / "stdout").read_text() + (sandbox / "stderr").read_text()
            assert SECRET not in seen
            ipc = seen.split("IPC\n", 1)[1].splitlines()
            assert [line for line in ipc if line.startswith("0x")] == []  # none of alice's
            tmpdir = s.sandbox(ALICE, "a1") / "tmp"
            assert (tmpdir / tag).read_text() == f"{SECRET}\n"
            assert os.stat(tmpdir).st_mode & 0o777 == 0o700
            # /dev/shm is each task's own: alice's file by name is not on the host's
            assert tag not in os.listdir("/dev/shm")
            await s.master.run("mallory", MALLORY, "m2", "ls -A /dev/shm; mount | grep shm")
            await s.master.ends(MALLORY, "m2")
            listed = (s.sandbox(MALLORY, "m2") / "stdout").read_text().splitlines()
            # (empty; the host's beneath it, then its own, which the task sees)
            assert listed[-1].startswith("drfmesos-shm on /dev/shm type tmpfs"), listed
    finally:
        for path in shared_files:
            path.unlink(missing_ok=True)


def test_a_root_slave_names_the_link_protections_that_are_off(tmp_path: Path) -> None:
    """With fs.protected_symlinks or protected_hardlinks off, a link one tenant plants in
    the shared /tmp is followed by another's task: the slave says so at start
    (`isolation.links_unprotected`, with the sysctl that fixes it)."""
    from slave.tenancy import unprotected_links

    fs = tmp_path / "fs"
    fs.mkdir()
    (fs / "protected_symlinks").write_text("0\n")
    (fs / "protected_hardlinks").write_text("1\n")
    assert unprotected_links(tmp_path) == ["fs.protected_symlinks"]
    (fs / "protected_symlinks").write_text("1\n")
    assert unprotected_links(tmp_path) == []


def test_a_python_other_users_cannot_reach_is_named_where_its_link_leads() -> None:
    """A venv's python is a link: the warning names the directory that stops other users
    on the way to what it leads to, not the link's own (which they pass)."""
    from slave.tenancy import python_problem

    with tempfile.TemporaryDirectory(dir="/tmp") as top:  # (pytest's own are mode 700)
        base = Path(top)
        base.chmod(0o755)
        closed, open_ = base / "closed", base / "open"
        (closed / "bin").mkdir(parents=True)
        open_.mkdir()
        closed.chmod(0o700)
        real = closed / "bin" / "python"
        real.touch(mode=0o755)
        (open_ / "python").symlink_to(real)
        why = python_problem(str(open_ / "python"))
        assert why == f"{closed} is mode 700, on the way to {real}, where {open_}/python leads"
        assert python_problem(str(real)) == f"{closed} is mode 700"


async def test_a_root_slave_warns_at_start_when_the_hosts_link_protections_are_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import structlog

    monkeypatch.setattr("slave.tenancy.unprotected_links", lambda: ["fs.protected_symlinks"])
    with structlog.testing.capture_logs() as lines:
        async with shared_slave():
            pass
    [warning] = [line for line in lines if line["event"] == "isolation.links_unprotected"]
    assert warning["fix"] == "sysctl fs.protected_symlinks=1"


# -- a descriptor to a cgroup's tasks file ----------------------------------------------------


def cgroup_of(pid: int) -> str | None:
    """A process's memory cgroup (None: it has exited since it was listed)."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except (FileNotFoundError, ProcessLookupError):
        return None
    for line in lines:
        if ":memory:" in line:
            return line.split(":", 2)[2]
    raise AssertionError(f"no memory cgroup for {pid}")


# mallory's task B: opens the `tasks` files of her task A's cgroup the moment they are
# her user's (A, a `true`, leaves nothing charged to its cgroup, so it could be kept for
# another task), then, told to, writes to what it holds
HOLDER = """
import os, sys, time
paths, fds = sys.argv[1:], {}
print("polling", flush=True)
deadline = time.monotonic() + 20
while len(fds) < len(paths) and time.monotonic() < deadline:
    for path in paths:
        if path not in fds:
            try:
                fds[path] = os.open(path, os.O_WRONLY)
            except OSError:
                pass
print("opened", len(fds), flush=True)
while not os.path.exists("join"):
    time.sleep(0.02)
for fd in fds.values():
    try:
        os.write(fd, b"0")
        print("joined", flush=True)
    except OSError as e:
        print("refused", e.errno, flush=True)
print("done", flush=True)
time.sleep(300)
"""


async def test_a_descriptor_to_a_tenants_own_cgroup_never_joins_the_victims() -> None:
    """mallory's task B opens her task A's cgroup `tasks` files while the slave has them
    handed to her user (a task's shell joins its cgroup itself). A ends; alice's task C
    starts with the same resources; then B writes to what it holds: it must not land in
    C's cgroup (once, A's cgroup was kept as a spare and given to C, and the descriptor
    still wrote)."""
    async with shared_slave(isolation="cgroups") as s:
        isolator = s.slave.isolator
        a = isolator.path_of(isolator.adopt(container_name(MALLORY, "a"), "mallory"))  # type: ignore[attr-defined]
        files = isolator.cgroups.procs_files(a)  # type: ignore[attr-defined]
        program = s.work.parent / "holder.py"
        program.write_text(HOLDER)
        os.chmod(program, 0o644)
        paths = " ".join(map(str, files))
        await s.master.run("mallory", MALLORY, "b", f"/usr/bin/python3 {program} {paths}")
        await eventually(lambda: "polling" in said(s, MALLORY, "b"))
        await s.master.run("mallory", MALLORY, "a", "true")
        await s.master.ends(MALLORY, "a")
        await eventually(lambda: "opened" in said(s, MALLORY, "b"), timeout=30)
        # (the files were never hers: root joins a task's cgroup for it, review 79; once,
        # they were handed to her user while A ran, and B's race to open them was won)
        upkeep = isolator.upkeep  # type: ignore[attr-defined]
        await eventually(lambda: not upkeep._due and not upkeep._inflight)
        await s.master.run("alice", ALICE, "c", "exec sleep 300")
        await s.master.reaches(ALICE, "c", TaskState.RUNNING)
        victim = s.slave.tasks[(ALICE, "c")].runner
        assert victim is not None
        assert victim.pid is not None
        slaves, pid = {cgroup_of(os.getpid())}, victim.pid

        def alices() -> set[str]:
            return {c for p in pids_below(pid) if (c := cgroup_of(p))} - slaves

        # (RUNNING is said as its chain starts: C's shell joins its cgroup a moment later)
        await eventually(lambda: bool(alices()))
        (s.sandbox(MALLORY, "b") / "join").touch()
        await eventually(lambda: "done" in said(s, MALLORY, "b"))
        bs = s.slave.tasks[(MALLORY, "b")].runner
        assert bs is not None
        assert bs.pid is not None
        mallorys = {c for p in pids_below(bs.pid) if (c := cgroup_of(p))}
        assert not alices() & mallorys, said(s, MALLORY, "b")


def said(s: Shared, framework_id: str, task_id: str) -> str:
    """What a task has printed so far (nothing before its sandbox is made)."""
    try:
        return s.output(framework_id, task_id)
    except FileNotFoundError:
        return ""


def pids_below(pid: int) -> list[int]:
    """`pid` and its descendants, as the host sees them."""
    found, todo = [pid], [pid]
    while todo:
        parent = todo.pop()
        try:  # (a process may exit while its tree is read)
            tids = os.listdir(f"/proc/{parent}/task")
        except FileNotFoundError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as f:
                    children = [int(c) for c in f.read().split()]
            except FileNotFoundError:
                continue
            found += children
            todo += children
    return found


async def test_a_task_reaches_its_own_cgroup_and_lists_nobody_elses() -> None:
    """The slave's parent cgroups let tasks pass, not list: mallory's task reads its own
    cgroup's usage, and learns neither the name nor the usage of alice's."""
    async with shared_slave(isolation="cgroups") as s:
        await s.master.run("alice", ALICE, "a1", "exec sleep 300")
        await s.master.reaches(ALICE, "a1", TaskState.RUNNING)
        parent = f"/sys/fs/cgroup/memory/drfmesos/{s.slave.slave_id}"
        seen = await mallory_runs(
            s,
            "m1",
            f"ls /sys/fs/cgroup/memory/drfmesos {parent}; ls -R {parent} | head; "
            "own=$(grep :memory: /proc/self/cgroup | cut -d: -f3); "
            'echo "usage $(cat /sys/fs/cgroup/memory$own/memory.usage_in_bytes)"',
        )
        assert "alice" not in seen
        assert s.slave.slave_id not in seen.replace(parent, "")
        usage = [line for line in seen.splitlines() if line.startswith("usage ")]
        assert usage, seen
        assert usage[0].split()[1].isdigit(), seen


async def mallory_runs(s: Shared, task_id: str, script: str) -> str:
    await s.master.run("mallory", MALLORY, task_id, script)
    await s.master.ends(MALLORY, task_id)
    sandbox = s.sandbox(MALLORY, task_id)
    return "".join((sandbox / name).read_text() for name in ("stdout", "stderr"))


async def test_a_root_slave_told_not_to_switch_users_says_its_tasks_run_as_root() -> None:
    """--no-switch-user on a root slave runs every tenant's task as root: its start line
    says so, at warning level, in those words."""
    import structlog

    with structlog.testing.capture_logs() as lines:
        async with shared_slave(switch_user=False):
            pass
    [warning] = [line for line in lines if line["event"] == "isolation.tenants"]
    assert warning["log_level"] == "warning"
    assert warning["what_is_not_enforced"].startswith("tasks run as ROOT")


async def test_each_task_has_a_tmp_of_its_own_and_the_slaves_is_untouched() -> None:
    """alice's task leaves her secret in /tmp, /var/tmp and /run/lock, readable by all (chmod 644:
    umask alone does not stop a careless tenant); mallory's task lists and reads both and
    plants a file in each for alice's next task. Each task's /tmp and /var/tmp are its
    sandbox's `tmp` and `var-tmp` bound there in its own mount namespace: mallory finds
    nothing, alice's next task finds nothing planted, and the slave's own /tmp and
    /var/tmp hold none of it."""
    tag = f"drfmesos-test-{os.getpid()}"
    shared = " ".join(SHARED_DIRS)
    host = [Path(d) / name for d in SHARED_DIRS for name in (tag, f"{tag}-planted")]
    try:
        async with shared_slave(base_in=OUTSIDE_TMP) as s:
            await s.master.run(
                "alice", ALICE, "a1",
                f"for d in {shared}; do echo {SECRET} > $d/{tag}; chmod 644 $d/{tag}; "
                "done; echo ready; exec sleep 300",
            )  # fmt: skip
            await s.master.reaches(ALICE, "a1", TaskState.RUNNING)
            await eventually(lambda: "ready" in said(s, ALICE, "a1"))
            await s.master.run(
                "mallory", MALLORY, "m1",
                f"ls -A {shared}; cd /; cat {' '.join(f'{d}/{tag}' for d in SHARED_DIRS)} "
                f"/tmp/*/{tag}; for d in {shared}; do echo evil > $d/{tag}-planted; "
                f"chmod 666 $d/{tag}-planted; done; true",
            )  # fmt: skip
            await s.master.ends(MALLORY, "m1")
            sandbox = s.sandbox(MALLORY, "m1")
            seen = (sandbox / "stdout").read_text() + (sandbox / "stderr").read_text()
            assert SECRET not in seen
            assert tag not in (sandbox / "stdout").read_text()  # (its listing: empty)
            assert (sandbox / "tmp" / f"{tag}-planted").read_text() == "evil\n"
            planted = " ".join(f"{d}/{tag}-planted" for d in SHARED_DIRS)
            await s.master.run("alice", ALICE, "a2", f"cat {planted}; true")
            await s.master.ends(ALICE, "a2")
            assert "evil" not in s.output(ALICE, "a2")
            alices = s.sandbox(ALICE, "a1")
            assert (alices / "tmp" / tag).read_text() == f"{SECRET}\n"
            assert (alices / "var-tmp" / tag).read_text() == f"{SECRET}\n"
            assert os.stat(alices / "tmp").st_uid == os.stat(alices).st_uid == task_uid(s, "alice")
            assert not any(path.exists() for path in host)  # the slave's are untouched
    finally:
        for path in host:
            path.unlink(missing_ok=True)


async def test_a_symlink_left_for_tmp_in_a_sandbox_is_never_bound() -> None:
    """mallory's task swaps its sandbox's `tmp` for a symlink to a directory it may not
    reach by path; a later task of the same id (its sandbox again) would have root bind
    that directory over its /tmp, reaching it past its parents' modes. The slave refuses
    the launch instead: TASK_FAILED, saying why."""
    async with shared_slave(base_in=OUTSIDE_TMP) as s:
        hidden = s.work.parent / "hidden"
        (hidden / "inner").mkdir(parents=True)
        os.chmod(hidden, 0o700)  # root's: nobody passes
        os.chmod(hidden / "inner", 0o777)  # open, but only to who reaches it
        command = f"rmdir tmp && ln -s {hidden / 'inner'} tmp; true"
        await s.master.run("mallory", MALLORY, "m1", command)
        await s.master.ends(MALLORY, "m1")
        assert (s.sandbox(MALLORY, "m1") / "tmp").is_symlink()
        s.master.statuses.clear()  # (the first run's end)
        await s.master.run("mallory", MALLORY, "m1", "echo in > /tmp/x; true")
        ended = await s.master.ends(MALLORY, "m1")
        assert ended.state == TaskState.FAILED
        assert "tmp is not a directory of the task's user" in ended.message
        assert os.listdir(hidden / "inner") == []


async def test_a_task_cannot_unmount_its_own_tmp_to_reach_the_hosts() -> None:
    """mallory's task makes a user namespace of its own (the host lets users make them)
    and unmounts its /tmp, /var/tmp, /run/lock and /dev/shm there, to see the host's
    beneath: the kernel refuses (the mounts it inherited are locked), and the host's
    files stay out of its sight."""
    tag = f"drfmesos-host-{os.getpid()}"
    dirs = [*SHARED_DIRS, "/dev/shm"]
    host = [Path(d) / tag for d in dirs]
    try:
        for path in host:
            path.write_text("the host's\n")
        async with shared_slave(base_in=OUTSIDE_TMP) as s:
            listing = f"ls -A {' '.join(dirs)}"
            await s.master.run(
                "mallory", MALLORY, "m1",
                f"{listing}; unshare -Urm sh -c 'umount -l {' '.join(dirs)}; {listing}'; true",
            )  # fmt: skip
            await s.master.ends(MALLORY, "m1")
            sandbox = s.sandbox(MALLORY, "m1")
            seen = (sandbox / "stdout").read_text() + (sandbox / "stderr").read_text()
            assert tag not in seen
            assert "umount" in seen  # (it tried, and was told no)
    finally:
        for path in host:
            path.unlink(missing_ok=True)
