"""Health checks on a real broker, master and slave, with real task processes: a task whose
HTTP check starts failing is reported unhealthy and killed after its consecutive
failures, as Mesos's command executor does; TCP and COMMAND checks; a COMMAND check runs
as the task's user in its PID namespace and cgroup, never as root; the verdict in the
master's state and /metrics; the bounds a tenant's checks are held to."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from master.http.metrics import exposition, registry_for
from protocol import logs
from protocol import mesos_json as mj
from protocol.health_checker import CheckState, check_health, http_probe
from protocol.tooling.ports import free_port
from protocol.transport.aio import within
from protocol.wire.messages import (
    CommandCheck,
    CommandInfo,
    ContainerInfo,
    ExecutorInfo,
    FrameworkCapability,
    HealthCheck,
    HealthCheckType,
    HTTPCheck,
    KillTask,
    Reason,
    RunTasks,
    TaskInfo,
    TaskState,
    TaskStatus,
    TCPCheck,
)
from protocol.wire.resources import Resources

from harness.fakes import FakeFramework
from harness.health import statuses, verdict
from harness.helpers import eventually
from harness.shared_slave import ALICE, T, shared_slave
from harness.slave import Rig, http_server
from harness.slave import rig as rig


def quick(kind: HealthCheckType, failures: int = 2, **check: object) -> HealthCheck:
    """A check as often as a tenant may ask: every second, from the start."""
    return HealthCheck(
        type=kind, delay_seconds=0, interval_seconds=1, timeout_seconds=1,
        grace_period_seconds=5, consecutive_failures=failures, **check,
    )  # type: ignore[arg-type]  # fmt: skip


async def launch(
    rig: Rig, fw: FakeFramework, task_id: str, command: str, check: HealthCheck
) -> Path:
    return await rig.launch(fw, command, task_id, health_check=check)


async def test_a_task_whose_http_check_starts_failing_is_reported_and_killed(rig: Rig) -> None:
    fw = await rig.framework()
    slave = await rig.start_slave("s1", Resources(cpus=2, mem=1024), pid_namespace=True)
    port = free_port()
    check = quick(HealthCheckType.HTTP, http=HTTPCheck(port=port, path="/health"))
    sandbox = await launch(rig, fw, "web", http_server(port), check)
    answer = f"GET http://127.0.0.1:{port}/health answered 500"
    healthy = await verdict(fw, "web", True)
    assert healthy.message == "its health check passed"
    view = next(t for t in rig.master.views.state().tasks if t.task_id == "web")
    assert view.healthy is True
    metrics = exposition(registry_for(rig.master.views)).decode()
    assert 'drfmesos_tasks_health{health="healthy"} 1.0' in metrics

    (sandbox / "sick").touch()
    sick = await verdict(fw, "web", False)
    assert sick.message == f"its health check failed: {answer}"
    killed = await fw.update_for("web", TaskState.KILLED, timeout=20)
    assert killed.healthy is False
    assert killed.message == f"killed: its health check failed 2 times in a row: {answer}"
    # one update a change of verdict, not one a check; nothing after the end
    health = Reason.TASK_HEALTH_CHECK_STATUS_UPDATED
    assert [s.healthy for s in statuses(fw, "web") if s.reason == health] == [True, False]
    assert statuses(fw, "web")[-1].state == TaskState.KILLED
    assert (fw.framework_id, "web") not in slave.health
    metrics = exposition(registry_for(rig.master.views)).decode()
    assert 'drfmesos_tasks_health{health="healthy"} 0.0' in metrics


async def test_failures_in_the_grace_period_before_a_first_success_do_not_count(rig: Rig) -> None:
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    port = free_port()
    # nothing listens for its first 2 s: inside its 5 s of grace, one failure is enough
    # to kill it, and it is not killed; once it listens it is healthy
    check = quick(HealthCheckType.TCP, failures=1, tcp=TCPCheck(port=port))
    await launch(rig, fw, "late", f"sleep 2; exec {http_server(port)}", check)
    await verdict(fw, "late", True)
    assert not [s for s in statuses(fw, "late") if s.healthy is False]


async def test_a_tcp_check_that_finds_nothing_listening_kills_the_task(rig: Rig) -> None:
    fw = await rig.framework(capabilities=[FrameworkCapability.TASK_KILLING_STATE])
    await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    port = free_port()
    check = quick(HealthCheckType.TCP, tcp=TCPCheck(port=port)).model_copy(
        update={"grace_period_seconds": 0}
    )
    await launch(rig, fw, "deaf", "sleep 300", check)
    killed = await fw.update_for("deaf", TaskState.KILLED, timeout=20)
    assert killed.healthy is False
    assert f"no connection to port {port}" in killed.message
    # a framework that asked hears TASK_KILLING first, as from any kill
    assert [s.state for s in statuses(fw, "deaf")][-2:] == [TaskState.KILLING, TaskState.KILLED]


def preloadable(where: Path) -> Path | None:
    """A library that, loaded into any process, leaves a mark in `where` named by its
    uid (None: no C compiler here)."""
    where.chmod(0o777)  # (any user leaves its mark)
    compiler = shutil.which("cc")
    if compiler is None:
        return None
    source, library = where / "mark.c", where / "mark.so"
    source.write_text(
        "#include <fcntl.h>\n#include <stdio.h>\n#include <unistd.h>\n"
        "__attribute__((constructor)) static void mark(void) {\n"
        f'  char p[512]; snprintf(p, sizeof p, "{where}/uid-%d", (int)getuid());\n'
        "  close(open(p, O_CREAT | O_WRONLY, 0666)); }\n"
    )
    subprocess.run([compiler, "-shared", "-fPIC", "-o", library, source], check=True)
    return library


def marked(where: Path) -> list[str]:
    return sorted(p.name for p in where.glob("uid-*"))


async def test_a_command_check_runs_as_the_task_in_its_namespaces_and_cgroup() -> None:
    """On a slave that switches users, with PID namespaces and cgroups: the check runs
    as the task's user, never root, in its PID namespace, its cgroup and its sandbox,
    with its variables; none of them (LD_PRELOAD) reaches a process of root's."""
    # (and its /tmp, its own: what the task left there, not what the slave's /tmp holds)
    host_tmp = Path(tempfile.mkstemp(prefix="drfmesos-host-tmp-", dir="/tmp")[1])
    whoami = (
        'echo "$(id -u) $(readlink /proc/self/ns/pid) $(sort /proc/self/cgroup | cksum) '
        f'$(ls /tmp | cksum) $(test -e {host_tmp} && echo host-tmp) $(pwd) $GREETING"'
    )
    marks = Path(tempfile.mkdtemp(prefix="drfmesos-preload-", dir="/var/lib"))  # (not /tmp)
    library = await asyncio.to_thread(preloadable, marks)
    env = {"GREETING": "hello"} | ({"LD_PRELOAD": str(library)} if library else {})
    check = quick(
        HealthCheckType.COMMAND,
        # (healthy once it sees what the task left in its /tmp)
        command=CommandCheck(value=f"test -e /tmp/mine && {whoami} > check.out", environment=env),
    )
    try:
        async with shared_slave(base_in="/var/lib") as s:  # (a /tmp its task's own)
            task = TaskInfo(
                task_id="cmd", slave_id=s.master.slave_id,
                resources=Resources(cpus=0.1, mem=64), health_check=check,
                command=CommandInfo(
                    value=f"touch /tmp/mine; {whoami} > t; mv t task.out; sleep 300",
                    environment={"GREETING": "hi"},
                ),
            )  # fmt: skip
            launch = RunTasks(framework_id=ALICE, tasks=[task], principal="alice")
            await s.master.bus.publish(T.slave("slave", s.master.slave_id), launch)
            await s.master.reaches(ALICE, "cmd", TaskState.RUNNING)
            await eventually(lambda: any(st.healthy for _, st in s.master.statuses), timeout=20)
            sandbox = s.sandbox(ALICE, "cmd")
            await eventually(lambda: (sandbox / "task.out").exists())
            ran = (sandbox / "task.out").read_text().split()
            checked = (sandbox / "check.out").read_text().split()
            assert ran[0] != "0"
            # its user, its PID namespace, its cgroups, its /tmp (not the slave's)
            assert checked[:6] == ran[:6]
            assert checked[6:] == [str(sandbox), "hello"]
            assert ran[6:] == [str(sandbox), "hi"]
            assert (sandbox / "tmp" / "mine").exists()
            if library is not None:  # loaded as the task's user, never as root
                assert marked(marks) == [f"uid-{ran[0]}"]
            kill = KillTask(framework_id=ALICE, task_id="cmd")
            await s.master.bus.publish(T.slave("slave", s.master.slave_id), kill)
            await s.master.ends(ALICE, "cmd")
    finally:
        await asyncio.to_thread(shutil.rmtree, marks, True)
        os.unlink(host_tmp)


async def test_a_failing_command_check_says_its_exit_code(rig: Rig) -> None:
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    check = quick(HealthCheckType.COMMAND, failures=1, command=CommandCheck(value="exit 7"))
    check = check.model_copy(update={"grace_period_seconds": 0})
    await launch(rig, fw, "bad", "sleep 300", check)
    killed = await fw.update_for("bad", TaskState.KILLED, timeout=20)
    assert killed.message == (
        "killed: its health check failed 1 times in a row: the command exited with code 7"
    )


def test_a_tenant_cannot_have_checks_run_without_pause() -> None:
    for bad in (
        {"interval_seconds": 0.001},
        {"interval_seconds": 0},
        {"timeout_seconds": 0},
        {"timeout_seconds": 3600},
        {"consecutive_failures": 0},
        {"delay_seconds": -1},
        {"grace_period_seconds": 10**9},
    ):
        with pytest.raises(ValidationError):
            HealthCheck(type=HealthCheckType.TCP, tcp=TCPCheck(port=80), **bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        HealthCheck(type=HealthCheckType.HTTP, tcp=TCPCheck(port=80))  # the wrong field
    with pytest.raises(ValidationError):
        HTTPCheck(port=80, path="no-slash")
    with pytest.raises(ValidationError):
        HTTPCheck(port=80, path="/a b\r\nHost: x")
    http = HealthCheck(type=HealthCheckType.HTTP, http=HTTPCheck(port=80))
    command = CommandInfo(value="true")
    executor = ExecutorInfo(executor_id="e", command=command)
    checked = TaskInfo(
        task_id="t", slave_id="s", resources=Resources(cpus=1), executor=executor,
        health_check=http,
    )  # fmt: skip
    assert checked.health_check == http  # (an executor's task: its executor checks it)
    with pytest.raises(ValidationError):  # a COMMAND check in an image is not run
        TaskInfo(
            task_id="t", slave_id="s", resources=Resources(cpus=1), command=command,
            container=ContainerInfo(image="busybox"),
            health_check=quick(HealthCheckType.COMMAND, command=CommandCheck(value="true")),
        )  # fmt: skip


def test_health_checks_in_mesos_json() -> None:
    check = mj.health_check_from_mesos(
        {"type": "HTTP", "http": {"port": 8080, "path": "/health", "scheme": "http"},
         "delay_seconds": 0, "interval_seconds": 2, "consecutive_failures": 5}
    )  # fmt: skip
    assert check == HealthCheck(
        type=HealthCheckType.HTTP, http=HTTPCheck(port=8080, path="/health"),
        delay_seconds=0, interval_seconds=2, consecutive_failures=5,
    )  # fmt: skip
    assert mj.health_check_from_mesos(mj.health_check_to_mesos(check)) == check
    # before Mesos 1.2 a check had no type: the one field given says it
    old = mj.health_check_from_mesos({"command": {"value": "true"}})
    assert old is not None
    assert old.type == HealthCheckType.COMMAND
    for bad in (
        {"type": "HTTP", "http": {"port": 8080}, "interval_seconds": 0.01},
        {"type": "HTTP", "http": {"port": 8080, "scheme": "https"}},
        {"type": "TCP"},
    ):
        with pytest.raises(mj.MesosJSONError):
            mj.health_check_from_mesos(bad)
    status = TaskStatus(task_id="t", state=TaskState.RUNNING, healthy=False)
    assert mj.status_to_mesos(status)["healthy"] is False
    assert "healthy" not in mj.status_to_mesos(TaskStatus(task_id="t", state=TaskState.RUNNING))


async def test_an_http_check_reads_only_a_status_line_and_within_its_timeout() -> None:
    """A task's server that answers a byte at a time, or not in HTTP (a status of other
    than three ASCII digits: "\\xb2" is a digit to str.isdigit, not to int()), holds
    its check no longer than its timeout, and fails it."""

    async def drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        with contextlib.suppress(ConnectionError):
            for byte in b"HTTP/1.0 200 OK\r\n":
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(0.2)

    def answering(
        line: bytes,
    ) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(line)
            await writer.drain()
            writer.close()

        return answer

    for serve, why in (
        (drip, "no answer in 0.5 s"),
        (answering(b"SSH-2.0-OpenSSH\r\n"), "not an HTTP answer"),
        (answering(b"HTTP/1.1 \xb200 OK\r\n"), "not an HTTP answer"),
        (answering(b"HTTP/1.1 2\r\n"), "not an HTTP answer"),
    ):
        server_ = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server_.sockets[0].getsockname()[1]
        loop = asyncio.get_running_loop()
        started = loop.time()
        answer = await http_probe(port, "/", timeout=0.5)
        assert answer == f"GET http://127.0.0.1:{port}/: {why}"
        assert loop.time() - started < 1.0
        server_.close()
        await server_.wait_closed()
    assert await http_probe(free_port(), "/", timeout=0.5) is not None  # nothing listens


async def test_checks_resumed_after_a_restart_go_on_where_they_were() -> None:
    """A slave restarted while its task fails its checks goes on where they were, as
    Mesos's checker, which outlives its agent, does: two failures of three counted
    already, the next one kills it (its verdict not said again); and a task checked
    since long ago is not given its grace period again."""
    check = HealthCheck(
        type=HealthCheckType.COMMAND,
        command=CommandCheck(value="false"),
        delay_seconds=0,
        interval_seconds=1,
        grace_period_seconds=60,
        consecutive_failures=3,
    )
    said: list[bool] = []
    ends: list[str] = []
    kept: list[int] = []

    async def hangs() -> str | None:
        return "no answer"

    async def say(healthy: bool, why: str) -> None:
        said.append(healthy)

    async def failed(why: str) -> None:
        ends.append(why)

    async def keep(state: CheckState) -> None:
        kept.append(state.failures)

    log = logs.get("test")
    failing = CheckState(since=time.time() - 120, healthy=False, failures=2)
    await within(check_health(check, hangs, say, failed, log, failing, keep), 2)
    assert (said, kept, failing.failures) == ([], [3], 3)
    assert ends == ["its health check failed 3 times in a row: no answer"]

    # never healthy, and checked for 120 s: past its grace of 60 s, its failures count
    once = check.model_copy(update={"consecutive_failures": 1})
    await within(check_health(once, hangs, say, failed, log, CheckState(time.time() - 120)), 2)
    assert said == [False]
