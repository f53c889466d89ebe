"""A hostile tenant's tasks on a slave it shares with a victim reach nothing of the
victim's, nor the slave's (#45): real slaves as root with task users, PID namespaces and
cgroups, real processes under real uids, told what to run as a master would tell them
(each launch names its framework's principal, `RunTasks.principal`).

`mallory`'s command tasks try every read, signal and impersonation a task could: alice's
environment through /proc, her sandbox, the slave's secret file (from the environment and
from /proc/*/cmdline), its work dir and journals, `kill -0` and `kill` on her processes,
her executor's HTTP API without a token and with mallory's own, and framework ids that
would have named alice's executor or cgroup. Each attempt prints what it got; the tests
read mallory's stdout, as mallory could.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path

import pytest

from protocol.wire.messages import (
    CommandInfo,
    ExecutorInfo,
    KillTask,
    ReadFile,
    TaskState,
)
from protocol.wire.resources import Resources
from slave.executors import ExecutorProcess
from slave.files import read_sandbox_file

from harness.helpers import eventually
from harness.shared_slave import ALICE, MALLORY, Shared, shared_slave
from task_python import task_python_env

SECRET = "alice-secret-7f3a"  # in alice's task environment and her sandbox's stdout


async def test_each_principals_tasks_run_as_a_user_of_its_own_in_a_pid_namespace() -> None:
    async with shared_slave() as s:
        report = "id -u; id -g; echo $$; ls /proc | grep -c '^[0-9]'; stat -c %a:%u ."
        await s.master.run("alice", ALICE, "a1", report)
        await s.master.run("mallory", MALLORY, "m1", report)
        await s.master.ends(ALICE, "a1")
        await s.master.ends(MALLORY, "m1")
        alice, mallory = s.output(ALICE, "a1").split(), s.output(MALLORY, "m1").split()
        assert alice[0] != mallory[0]  # a uid each
        assert 0 not in (int(alice[0]), int(mallory[0]))
        assert alice[0] == alice[1]  # its own group
        assert alice[2] != "1"  # (its shell is not the namespace's init: the wrapper is)
        assert int(alice[3]) <= 4  # its /proc shows its own few processes, not the host's
        assert alice[4] == f"700:{alice[0]}"  # its sandbox is its own, closed to others


def pids_of_group(pgid: int) -> list[int]:
    """The processes of a task's process group, as the host sees them."""
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry.name}/stat").read_text()
                if int(stat[stat.rfind(")") + 2 :].split()[2]) == pgid:
                    pids.append(int(entry.name))
    return pids


async def alice_with_a_secret(s: Shared, task_id: str = "a1") -> list[int]:
    """alice's long task, her secret in its environment and its stdout: its pids."""
    await s.master.run(
        "alice", ALICE, task_id, 'echo "$SECRET"; exec sleep 300', env={"SECRET": SECRET}
    )
    await s.master.reaches(ALICE, task_id, TaskState.RUNNING)
    await eventually(lambda: SECRET in s.output(ALICE, task_id))
    runner = s.slave.tasks[(ALICE, task_id)].runner
    assert runner is not None
    assert runner.pid is not None
    return pids_of_group(runner.pid)


async def mallory_runs(s: Shared, task_id: str, script: str) -> str:
    """mallory's command task: what it printed (as mallory may read it), once it ended."""
    await s.master.run("mallory", MALLORY, task_id, script)
    await s.master.ends(MALLORY, task_id)
    sandbox = s.sandbox(MALLORY, task_id)
    files = ((sandbox / name).read_bytes() for name in ("stdout", "stderr"))
    return b"".join(files).decode(errors="replace")


async def test_a_tenants_task_reads_nothing_of_the_victims_nor_the_slaves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """mallory's task tries alice's environment (/proc/PID/environ of every process it
    sees, and of alice's pids by number), her sandbox's stdout by its path, the slave's
    secret file (named in the slave's environment, and on a slave's command line in
    /proc/PID/cmdline), the slave's work dir, its journals and its executor key."""
    async with shared_slave() as s:
        secret_file = s.work.parent / "slave-secret"
        secret_file.write_text("slave-secret-0c1d\n")
        os.chmod(secret_file, 0o600)
        monkeypatch.setenv("DRFMESOS_SECRET_FILE", str(secret_file))
        # a slave process's command line, as `drfmesos slave --secret-file ...` shows it
        decoy = await asyncio.create_subprocess_exec(
            "python3", "-c", "import time; time.sleep(300)", "--secret-file", str(secret_file)
        )
        try:
            pids = await alice_with_a_secret(s)
            sandbox = s.sandbox(ALICE, "a1")
            work = s.work
            script = f"""
                for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done
                for p in {" ".join(map(str, pids))}; do tr '\\0' '\\n' < /proc/$p/environ; done
                cat {sandbox}/stdout; ls {sandbox}; ls {sandbox.parent}
                echo "env: $DRFMESOS_SECRET_FILE"; cat "$DRFMESOS_SECRET_FILE"
                for f in /proc/[0-9]*/cmdline; do
                  tr '\\0' '\\n' < $f | grep -A1 -e --secret-file | tail -n 1
                done | sort -u | while read -r path; do cat "$path"; done
                cat {secret_file}
                ls -la {work}; cat {work}/journal {work}/executor_secret_key
                ls -R {work}/runs {work}/sandboxes
                true
            """
            seen = await mallory_runs(s, "m1", script)
        finally:
            decoy.kill()
            await decoy.wait()
        assert SECRET not in seen
        assert "slave-secret-0c1d" not in seen
        key = (s.work / "executor_secret_key").read_bytes()
        assert key.hex() not in seen.encode().hex()
        assert ALICE not in seen.split()  # (nor her framework's id, listing a directory)
        assert "env: \n" in seen  # the slave's environment never reached the task
        assert s.master.states(ALICE, "a1")[-1] == TaskState.RUNNING


async def test_a_tenants_task_can_signal_none_of_the_victims_processes() -> None:
    async with shared_slave() as s:
        pids = await alice_with_a_secret(s)
        assert len(pids) >= 2
        numbers = " ".join(map(str, pids))
        script = f"""
            for p in {numbers}; do kill -0 $p && echo "reached $p"; done
            for p in {numbers}; do kill -9 $p && echo "killed $p"; done
            true
        """
        seen = await mallory_runs(s, "m1", script)
        assert "reached" not in seen
        assert "killed" not in seen
        assert all(map(alive, pids))
        assert s.master.states(ALICE, "a1")[-1] == TaskState.RUNNING


async def test_a_kill_ends_everything_in_the_task_though_it_left_its_group() -> None:
    """A task's process that starts a session of its own (`setsid`) leaves its process
    group: its PID namespace still ends with the task."""
    async with shared_slave(isolation="posix") as s:
        await s.master.run("alice", ALICE, "a1", "setsid sleep 300 & echo $! > child; wait")
        await s.master.reaches(ALICE, "a1", TaskState.RUNNING)
        await eventually(lambda: (s.sandbox(ALICE, "a1") / "child").exists())
        runner = s.slave.tasks[(ALICE, "a1")].runner
        assert runner is not None
        assert runner.pid is not None
        inside = [p for p in _descendants(runner.pid) if "sleep" in _cmdline(p)]
        assert inside
        await s.slave._on_kill_task(KillTask(framework_id=ALICE, task_id="a1"), None)
        await s.master.ends(ALICE, "a1")
        await eventually(lambda: not any(map(alive, inside)))


def alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{parent}/task"):
                children = Path(f"/proc/{parent}/task/{tid}/children").read_text().split()
                todo.extend(map(int, children))
                found.extend(map(int, children))
    return found


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return ""


# -- the executor's HTTP API ------------------------------------------------------------------

ATTACK = """
import json, os, sys, urllib.request
endpoint, framework_id, executor_id, task_id = sys.argv[1:5]
update = {"type": "UPDATE", "framework_id": {"value": framework_id},
          "executor_id": {"value": executor_id},
          "update": {"status": {"task_id": {"value": task_id}, "state": "TASK_FAILED",
                                "uuid": "AAAAAAAAAAAAAAAAAAAAAA==", "source": "SOURCE_EXECUTOR"}}}
own = os.environ.get("MESOS_EXECUTOR_AUTHENTICATION_TOKEN", "")
for name, header in (("none", None), ("own", "Bearer " + own), ("forged", "Bearer x.y.z")):
    request = urllib.request.Request(
        f"http://{endpoint}/api/v1/executor", json.dumps(update).encode(),
        {"Content-Type": "application/json"})
    if header is not None:
        request.add_header("Authorization", header)
    try:
        status = urllib.request.urlopen(request, timeout=10).status
    except urllib.error.HTTPError as e:
        status = e.code
    print(name, status, flush=True)
"""


def adapter_executor(executor_id: str, command: str) -> ExecutorInfo:
    """A Mesos executor as the Mesos scheduler API starts one: our adapter, serving the
    executor HTTP API, with the real command beside it."""
    return ExecutorInfo(
        executor_id=executor_id,
        command=CommandInfo(
            value='"$DRFMESOS_PYTHON" -m frameworks.mesos_executor',
            environment={"MESOS_EXECUTOR_COMMAND": command},
        ),
        resources=Resources(cpus=0.1, mem=128),
    )


def endpoint_of(sandbox: Path) -> str | None:
    """The adapter's endpoint, from its log (root reads it; mallory may not)."""
    with contextlib.suppress(OSError):
        for line in (sandbox / "stderr").read_text().splitlines():
            if '"mesos_executor.started"' in line:
                endpoint: str = json.loads(line)["endpoint"]
                return endpoint
    return None


async def test_a_tenant_cannot_call_the_victims_executor_api_without_its_token() -> None:
    """alice runs a Mesos executor (the adapter serves its HTTP API on the loopback, as
    her user); mallory's executor, as mallory, calls it with no token, with mallory's own
    (a valid token of this slave's) and with a forged one, marking alice's task failed.
    alice's own token is taken."""
    async with shared_slave(task_env=task_python_env()) as s:
        executor = adapter_executor("alice-exec", "sleep 300")
        await s.master.run("alice", ALICE, "a1", "", executor=executor)
        alices = s.sandbox(ALICE, "executor-alice-exec")
        await eventually(lambda: endpoint_of(alices) is not None, timeout=30)
        endpoint = endpoint_of(alices)
        assert endpoint is not None
        program = s.work.parent / "attack.py"
        program.write_text(ATTACK)
        os.chmod(program, 0o644)
        attack = f"/usr/bin/python3 {program} {endpoint} {ALICE} alice-exec a1"
        spy = ExecutorInfo(
            executor_id="spy", command=CommandInfo(value=attack), resources=Resources(cpus=0.1)
        )
        await s.master.run("mallory", MALLORY, "m1", "", executor=spy)
        await s.master.ends(MALLORY, "m1")
        seen = (s.sandbox(MALLORY, "executor-spy") / "stdout").read_text().split("\n")
        assert seen[:3] == ["none 401", "own 403", "forged 401"], seen
        assert TaskState.FAILED not in s.master.states(ALICE, "a1")
        # alice's own token is hers to use (as her Mesos executor library sends it)
        adapter = next(
            p
            for p in _descendants(_executor_pid(s, ALICE, "alice-exec"))
            if "frameworks.mesos_executor" in _cmdline(p) and not _cmdline(p).startswith("/bin/sh")
        )
        token = _environ(adapter)["MESOS_EXECUTOR_AUTHENTICATION_TOKEN"]
        status = await asyncio.to_thread(_message, endpoint, token, ALICE, "alice-exec")
        assert status == 202
        await eventually(lambda: [m.data for m in s.master.messages] == [b"hello"])


def running_executors(s: Shared) -> int:
    return sum(1 for e in s.slave.executors.values() if e.pid is not None)


def executor(s: Shared, framework_id: str, executor_id: str) -> ExecutorProcess:
    """The slave's executor process of these ids (found by them, whatever its key)."""
    found = [
        e
        for e in s.slave.executors.values()
        if (e.framework_id, e.executor_id) == (framework_id, executor_id)
    ]
    assert len(found) == 1, f"{framework_id}/{executor_id}: {list(s.slave.executors)}"
    return found[0]


def _executor_pid(s: Shared, framework_id: str, executor_id: str) -> int:
    pid = executor(s, framework_id, executor_id).pid
    assert pid is not None
    return pid


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def _message(endpoint: str, token: str, framework_id: str, executor_id: str) -> int:
    import urllib.request

    call = {
        "type": "MESSAGE",
        "framework_id": {"value": framework_id},
        "executor_id": {"value": executor_id},
        "message": {"data": "aGVsbG8="},
    }
    request = urllib.request.Request(
        f"http://{endpoint}/api/v1/executor",
        json.dumps(call).encode(),
        {"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return int(answer.status)


# -- names ------------------------------------------------------------------------------------


def sleeper(executor_id: str) -> ExecutorInfo:
    """An executor that starts and never registers: it holds a process and a cgroup."""
    return ExecutorInfo(
        executor_id=executor_id,
        command=CommandInfo(value="sleep 300"),
        resources=Resources(cpus=0.1, mem=32),
    )


async def test_a_framework_named_after_the_victims_reaches_none_of_her_executors() -> None:
    """mallory subscribed as `<alice's id>.alice`, her executor `exec-1`: once the same
    key as alice's executor `alice.exec-1` (`f"{framework}.{executor}"`), so mallory's
    task was handed to alice's executor."""
    async with shared_slave() as s:
        await s.master.run("alice", ALICE, "a1", "", executor=sleeper("alice.exec-1"))
        await eventually(lambda: running_executors(s) == 1)
        await s.master.run("mallory", f"{ALICE}.alice", "m1", "", executor=sleeper("exec-1"))
        await eventually(lambda: (f"{ALICE}.alice", "m1") in s.slave.tasks)
        await eventually(lambda: running_executors(s) == 2)
        alices = executor(s, ALICE, "alice.exec-1")
        assert alices.tasks == {"a1"}
        mallorys = executor(s, f"{ALICE}.alice", "exec-1")
        await eventually(lambda: mallorys.tasks == {"m1"})
        assert mallorys.pid != alices.pid
        assert alices.pid is not None
        assert alive(alices.pid)


async def test_a_framework_named_after_the_victims_executor_never_shares_its_cgroup() -> None:
    """mallory subscribed as `<alice's id>.executor-alice`, her task `t1`: its cgroup
    was once alice's executor `alice.t1`'s (`f"{framework}.{name}"`), and when the task
    ended the slave destroyed it, and alice's executor with it."""
    async with shared_slave(isolation="cgroups") as s:
        await s.master.run("alice", ALICE, "a1", "", executor=sleeper("alice.t1"))
        await eventually(lambda: running_executors(s) == 1)
        alices = executor(s, ALICE, "alice.t1")
        assert alices.pid is not None
        assert alices.container is not None
        # (root's wrapper joins the executor's cgroup as it starts, before it drops to
        # alice's user: read once it has)
        await eventually(lambda: _cgroup_of(alices.pid).startswith("/drfmesos/"))
        before = _cgroup_of(alices.pid)
        await s.master.run("mallory", f"{ALICE}.executor-alice", "t1", "cat /proc/self/cgroup")
        await s.master.ends(f"{ALICE}.executor-alice", "t1")
        assert before not in s.output(f"{ALICE}.executor-alice", "t1")
        await asyncio.sleep(0)  # (the task's cgroup goes a moment after its end)
        upkeep = s.slave.isolator.upkeep  # type: ignore[attr-defined]
        # (mallory's group, empty, waits for her next launch: no container is left due)
        await eventually(lambda: all(due.group for due in upkeep._due.values()))
        assert alive(alices.pid)
        assert _cgroup_of(alices.pid) == before


def _cgroup_of(pid: int) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        if ":memory:" in line:
            return line.split(":", 2)[2]
    raise AssertionError(f"no memory cgroup for {pid}")


# -- orphans keep their owner -----------------------------------------------------------------


async def test_a_restarted_slave_reports_each_frameworks_principal() -> None:
    """A master that lost its registry learns from the slave whose tasks these are
    (`Reregister.owners`), also after the slave's own restart."""
    async with shared_slave() as s:
        await alice_with_a_secret(s)
        await s.master.run("mallory", MALLORY, "m1", "sleep 300")
        await s.master.reaches(MALLORY, "m1", TaskState.RUNNING)
        await s.restart()
        await eventually(lambda: bool(s.master.reregistered))
        owners = s.master.reregistered[-1].owners
        assert owners == {ALICE: "alice", MALLORY: "mallory"}
        # a launch for alice's framework in another principal's name reaches none of it
        await s.master.run("mallory", ALICE, "a2", "echo mine")
        ended = await s.master.ends(ALICE, "a2")
        assert ended.state == TaskState.ERROR
        assert "another principal" in ended.message


# -- what lies in a sandbox is the task's ----------------------------------------------------


async def test_the_slave_reads_and_writes_no_file_a_task_links_into_its_sandbox() -> None:
    """mallory's task puts in its sandbox a symlink to alice's stdout and a hard link to
    the slave's task journal (which holds alice's environment): an operator's read of
    mallory's files (which mallory may ask for) returns neither. Its task id used again,
    a symlink it left where stdout goes makes the slave (root) write nothing through it."""
    async with shared_slave() as s:
        await alice_with_a_secret(s)
        alices = s.sandbox(ALICE, "a1") / "stdout"
        journal = s.work / "journal"  # (the slave's journals: its tasks' among them)
        victim = s.work.parent / "victim"
        victim.write_text("intact\n")
        os.chmod(victim, 0o644)
        await mallory_runs(
            s,
            "m1",
            f"ln -sf {alices} out; mv -f out stdout; ln -f {journal} err; mv -f err stderr; "
            f"ln -sf {victim} .keep",
        )
        for name in ("stdout", "stderr"):
            read = ReadFile(request_id="r", framework_id=MALLORY, task_id="m1", name=name)
            answer = await read_sandbox_file(s.work / "sandboxes", s.slave.slave_id, read)
            assert SECRET.encode() not in answer.data
        await s.master.run("mallory", MALLORY, "m2", f"ln -sf {victim} stdout; true")
        await s.master.ends(MALLORY, "m2")
        await s.master.run("mallory", MALLORY, "m2", "echo pwned")  # (its id used again)
        await eventually(lambda: len(s.master.states(MALLORY, "m2")) >= 6)
        await s.master.ends(MALLORY, "m2")
        assert victim.read_text() == "intact\n"


async def test_a_confined_task_outlives_a_slave_restart_its_end_known_its_kill_whole() -> None:
    """Recovery with `unshare` and the wrapper between the slave and the task: the
    restarted slave learns how one task ended (its exit status, written by the wrapper
    as the task's user) and kills the other whole."""
    async with shared_slave() as s:
        wait = "while [ ! -e go ]; do sleep 0.05; done; exit 3"
        await s.master.run("alice", ALICE, "ends", wait)
        await s.master.run("alice", ALICE, "killed", "sleep 300 & sleep 300 & wait")
        await s.master.reaches(ALICE, "ends", TaskState.RUNNING)
        await s.master.reaches(ALICE, "killed", TaskState.RUNNING)
        runner = s.slave.tasks[(ALICE, "killed")].runner
        assert runner is not None
        assert runner.pid is not None
        group = pids_of_group(runner.pid)
        await s.restart()
        (s.sandbox(ALICE, "ends") / "go").touch()
        ended = await s.master.ends(ALICE, "ends")
        assert (ended.state, ended.message) == (TaskState.FAILED, "exited with code 3")
        await s.slave._on_kill_task(KillTask(framework_id=ALICE, task_id="killed"), None)
        assert (await s.master.ends(ALICE, "killed")).state == TaskState.KILLED
        await eventually(lambda: not any(map(alive, group)))
