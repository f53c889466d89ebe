"""`drfmesos run`: one command on a real cluster (mosquitto, a master and a slave as
processes), as a newcomer runs it: its output here, its exit status, Ctrl-C that leaves
nothing running, and a word while no offer comes."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from cluster.local.secure import as_principal
from cluster.local.view import wait_state
from frameworks import DriverError
from frameworks.job import (
    ERROR_EXIT,
    FAILED_EXIT,
    KILLED_EXIT,
    LOST_EXIT,
    Lines,
    exit_code,
    follow,
)
from protocol.tooling.brokers import BrokerURL, MosquittoBroker, end_process
from protocol.transport.aio import within
from protocol.wire.messages import Reason, TaskFileData, TaskState, TaskStatus

from harness.helpers import live_cluster, processes_under, secure_cluster
from harness.images import IMAGE, image  # noqa: F401  (the fixture: podman holds IMAGE)
from harness.slave import port_server

CLUSTER = "run"


async def drfmesos_run(url: BrokerURL, *args: str) -> asyncio.subprocess.Process:
    return await run_as(["--broker", str(url), "--cluster", CLUSTER], *args)


async def run_to_its_end(url: BrokerURL, *args: str) -> tuple[int | None, bytes, bytes]:
    """`drfmesos run ARGS` until it exits by itself: its status, stdout and stderr."""
    proc = await drfmesos_run(url, *args)
    try:
        out, err = await within(proc.communicate(), 90)
    finally:
        await end_process(proc, kill=True)
    return proc.returncode, out, err


async def line_with(stream: asyncio.StreamReader | None, text: str, timeout: float) -> str:
    """The first line of `stream` that holds `text` (what came before it is dropped)."""
    assert stream is not None
    async with asyncio.timeout(timeout):
        while line := (await stream.readline()).decode():
            if text in line:
                return line
    raise AssertionError(f"the stream ended without {text!r}")


@pytest.mark.slow(10)
async def test_it_prints_the_commands_output_and_exits_with_its_code(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    async with live_cluster(mosquitto.url, CLUSTER, tmp_path, slaves=1):
        code, out, err = await run_to_its_end(
            mosquitto.url, "--cpus", "0.5", "--env", "WHO=world",
            "--", "sh", "-c", 'echo hi; echo "to $WHO" >&2; exit 3',
        )  # fmt: skip
    assert code == 3, err.decode()
    assert out == b"hi\n"  # its stdout alone: the command's own words go to stderr
    assert "to world" in err.decode()
    assert "run-0 TASK_FAILED: exited with code 3" in err.decode()


HEALTH = ["--health-delay", "0", "--health-interval", "1", "--health-grace", "0"]


@pytest.mark.slow(15)
async def test_it_says_when_its_health_check_changes_its_verdict(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    """A COMMAND check that passes while the command's `ready` file is there: unhealthy,
    healthy, unhealthy again, each said as it changes; the command's own code at the end."""
    async with live_cluster(mosquitto.url, CLUSTER, tmp_path, slaves=1):
        code, _, err = await run_to_its_end(
            mosquitto.url, "--cpus", "0.5", "--health-check", "cmd:test -f ready", *HEALTH,
            "--health-failures", "100",
            "--", "sh", "-c", "sleep 1.5; touch ready; sleep 4; rm ready; sleep 3.5",
        )  # fmt: skip
    words = [line.split() for line in err.decode().splitlines()]
    said = [w[3].rstrip(":") for w in words if w[:3] == ["drfmesos", "run:", "run-0"]]
    said = [verdict for verdict in said if verdict.endswith("healthy")]
    assert code == 0, err.decode()
    assert said[-2:] == ["healthy", "unhealthy"], err.decode()


@pytest.mark.slow(15)
async def test_a_health_check_names_the_port_the_offer_gave(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    """`http:$PORT0/`: each instance's check is of its own first port, which it only
    learns at its launch (a port of the slave's range, not one written here)."""
    serve = f"timeout 5 {port_server()}; exit 0"
    async with live_cluster(mosquitto.url, CLUSTER, tmp_path, slaves=1):
        code, _, err = await run_to_its_end(
            mosquitto.url, "--instances", "2", "--cpus", "0.2", "--mem", "64", "--ports", "1",
            "--health-check", "http:$PORT0/", *HEALTH, "--health-failures", "100",
            "--", "sh", "-c", serve,
        )  # fmt: skip
        refused = await run_to_its_end(
            mosquitto.url, "--health-check", "tcp:$PORT1", "--ports", "1", "--", "true"
        )
    assert code == 0, err.decode()
    assert "run-0 healthy" in err.decode(), err.decode()
    assert "run-1 healthy" in err.decode(), err.decode()
    assert refused[0] == 2  # (click's usage error) before anything is launched
    assert "names $PORT1, but --ports 1 gives each instance 1 port" in refused[2].decode()


@pytest.mark.slow(15)
async def test_a_run_whose_health_check_keeps_failing_is_killed(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    async with live_cluster(mosquitto.url, CLUSTER, tmp_path, slaves=1):
        code, _, err = await run_to_its_end(
            mosquitto.url, "--cpus", "0.5", "--health-check", "tcp:1", *HEALTH,
            "--health-failures", "2", "--", "sleep", "60",
        )  # fmt: skip
    assert code == KILLED_EXIT, err.decode()
    assert "run-0 unhealthy" in err.decode()
    assert "run-0 TASK_KILLED" in err.decode()


@pytest.mark.slow(10)
async def test_instances_run_at_once_and_the_worst_code_wins(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    async with live_cluster(mosquitto.url, CLUSTER, tmp_path, slaves=1):
        code, out, err = await run_to_its_end(
            mosquitto.url, "--instances", "3", "--cpus", "0.5", "--mem", "32",
            "--", "sh", "-c",
            'echo "$DRFMESOS_INSTANCE of $DRFMESOS_INSTANCES"; exit $((DRFMESOS_INSTANCE * 2))',
        )  # fmt: skip
    assert code == 4, err.decode()  # instance 2's: 0, 2, 4
    lines = sorted(out.decode().splitlines())
    assert lines == ["[0] 0 of 3", "[1] 1 of 3", "[2] 2 of 3"], err.decode()


@pytest.mark.slow(10)
async def test_each_instance_gets_ports_of_its_own_out_of_its_offer(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    """--ports 2: each instance finds two ports in PORT0, PORT1 and PORTS (the slave's
    default range, 31000-32000), none given twice, and `run` says which it launched on."""
    async with live_cluster(mosquitto.url, CLUSTER, tmp_path, slaves=1):
        code, out, err = await run_to_its_end(
            mosquitto.url, "--instances", "3", "--cpus", "0.2", "--mem", "32", "--ports", "2",
            "--", "sh", "-c", 'echo "$PORT0 $PORT1 $PORTS"',
        )  # fmt: skip
    assert code == 0, err.decode()
    given = [line.split("] ", 1)[1].split() for line in out.decode().splitlines()]
    assert len(given) == 3
    ports = [int(p) for first, second, _ in given for p in (first, second)]
    assert all(f"{a},{b}" == both for a, b, both in given)
    assert len(set(ports)) == 6
    assert all(31000 <= p <= 32000 for p in ports)
    assert "(ports [" in err.decode()


@pytest.mark.slow(15)
async def test_ctrl_c_kills_its_tasks_and_leaves_nothing_running(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    async with live_cluster(mosquitto.url, CLUSTER, tmp_path, slaves=1):
        proc = await drfmesos_run(
            mosquitto.url, "--instances", "2", "--cpus", "0.5",
            "--", "sh", "-c", "echo started; sleep 600",
        )  # fmt: skip
        try:
            await line_with(proc.stdout, "started", 60)
            await line_with(proc.stdout, "started", 30)  # (both instances run)
            await wait_state(mosquitto.url, CLUSTER, lambda s: len(s.tasks) == 2, 30)
            assert len(processes_under(tmp_path / "slave-0")) >= 2  # (their shells, sleeps)
            proc.send_signal(signal.SIGINT)
            _, err = await within(proc.communicate(), 15)  # at once, not after 600 s
        finally:
            await end_process(proc, kill=True)
        assert proc.returncode == 130, err.decode()
        assert "stopping: killing 2 task(s)" in err.decode()
        state = await wait_state(
            mosquitto.url, CLUSTER, lambda s: not s.tasks and not s.frameworks, 10
        )
        assert state.allocated.get("cpus", 0) == 0
        assert processes_under(tmp_path / "slave-0") == []


@pytest.mark.slow(10)
async def test_a_command_no_slave_can_hold_says_it_waits(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    async with live_cluster(mosquitto.url, CLUSTER, tmp_path, slaves=1):
        proc = await drfmesos_run(mosquitto.url, "--cpus", "64", "--", "true")
        try:
            said = await line_with(proc.stderr, "waiting for offers", 30)
            proc.send_signal(signal.SIGTERM)
            await within(proc.wait(), 15)
        finally:
            await end_process(proc, kill=True)
    assert "1 of 1 instance of cpus:64;mem:128 in role 'run'" in said
    # and why, as the master says it (`drfmesos why`): no slave could ever hold it
    assert "fits no slave even empty: short of cpus:" in said
    assert proc.returncode == 143


@pytest.mark.slow(20)
@pytest.mark.usefixtures("image")
async def test_with_an_image_the_command_runs_in_it(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    async with live_cluster(mosquitto.url, CLUSTER, tmp_path, slaves=1):
        code, out, err = await run_to_its_end(
            mosquitto.url, "--image", IMAGE, "--cpus", "0.5", "--mem", "64",
            "--", "sh", "-c", "echo in $MESOS_SANDBOX; exit 7",
        )  # fmt: skip
    assert code == 7, err.decode()
    assert out == b"in /mnt/mesos/sandbox\n"  # (the container's view of the sandbox)


@pytest.mark.slow(20)
@pytest.mark.usefixtures("image")
async def test_an_image_the_slave_lacks_says_so_and_exits_125(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    async with live_cluster(mosquitto.url, CLUSTER, tmp_path, slaves=1):
        code, _, err = await run_to_its_end(
            mosquitto.url, "--image", "localhost/busybox:1", "--", "echo", "hi"
        )
    # as Mesos says of a container it could not provision: TASK_FAILED, its reason
    # REASON_CONTAINER_LAUNCH_FAILED; it never ran: `docker run`'s 125
    assert code == ERROR_EXIT, err.decode()
    assert "run-0 TASK_FAILED: podman could not run image localhost/busybox:1" in err.decode()
    assert "image not known" in err.decode()


@pytest.mark.slow(20)
async def test_it_runs_as_its_callers_principal_in_a_role_it_was_given(tmp_path: Path) -> None:
    """On a secured cluster: the framework is the caller's principal's, in its own role;
    a role it was not given is refused, and the command says so."""
    principals = [("master", "master"), ("ops", "operator"), ("slave-0", "slave"),
                  ("alice", "framework")]  # fmt: skip
    async with secure_cluster(tmp_path, CLUSTER, principals, [["slave-0"]]) as c:
        alice = [
            "--broker", f"mqtts://alice@{c.url.host}:{c.url.port}", "--cluster", CLUSTER,
            "--secret-file", str(c.store.secret_file("alice")), "--ca", str(c.store.ca),
        ]  # fmt: skip
        refused = await run_as(alice, "--role", "ops", "--", "true")
        _, err = await within(refused.communicate(), 60)
        assert refused.returncode == 1
        assert err.decode().count("may not register in role 'ops'") == 1, err.decode()
        proc = await run_as(alice, "--cpus", "0.5", "--", "sh", "-c", "echo started; sleep 600")
        try:
            await line_with(proc.stdout, "started", 60)
            ops = as_principal(c.url, c.store, "ops")
            state = await wait_state(ops, CLUSTER, lambda s: len(s.tasks) == 1, 30)
            [fw] = state.frameworks
            assert (fw.principal, fw.role, fw.name) == ("alice", "alice", "run")
            proc.send_signal(signal.SIGINT)
            await within(proc.wait(), 15)
        finally:
            await end_process(proc, kill=True)
        assert proc.returncode == 130
        await wait_state(ops, CLUSTER, lambda s: not s.tasks and not s.frameworks, 10)


async def run_as(options: list[str], *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cluster", "run", *options, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


def status(state: TaskState, code: int | None = None) -> TaskStatus:
    return TaskStatus(task_id="t", state=state, exit_code=code)


def test_the_exit_status_is_the_highest_instances() -> None:
    assert exit_code([status(TaskState.FINISHED, 0)]) == 0
    assert exit_code([status(TaskState.FAILED, 3), status(TaskState.FINISHED, 0)]) == 3
    assert exit_code([status(TaskState.FAILED)]) == FAILED_EXIT
    assert exit_code([status(TaskState.KILLED), status(TaskState.FAILED, 3)]) == KILLED_EXIT
    assert exit_code([status(TaskState.LOST)]) == LOST_EXIT
    assert exit_code([status(TaskState.ERROR)]) == ERROR_EXIT
    launch_failed = TaskStatus(
        task_id="t", state=TaskState.FAILED, reason=Reason.CONTAINER_LAUNCH_FAILED
    )
    assert exit_code([launch_failed]) == ERROR_EXIT
    assert len({FAILED_EXIT, KILLED_EXIT, LOST_EXIT, ERROR_EXIT, 0}) == 5


def test_an_instances_lines_come_whole_after_its_prefix() -> None:
    written: list[bytes] = []
    lines = Lines(b"[1] ", written.append)
    lines.feed(b"a\nb")
    lines.feed(b"c\n")
    lines.feed(b"no newline")
    lines.close()
    assert b"".join(written) == b"[1] a\n[1] bc\n[1] no newline\n"


async def test_an_ended_tasks_output_outlasts_a_few_failed_reads() -> None:
    """A slave slow to answer just after its task's end (a loaded machine) fails a few
    reads in a row: the output still comes, read after a pause, not given up at once."""
    ended = asyncio.Event()
    ended.set()
    answers: list[TaskFileData | DriverError] = [DriverError("slow")] * 4 + [
        TaskFileData(request_id="r", task_id="t", data=b"done\n", offset=0, size=5)
    ]

    async def read(task_id: str, stream: str, offset: int, length: int) -> TaskFileData:
        if offset:
            return TaskFileData(request_id="r", task_id="t", offset=offset, size=5)
        answer = answers.pop(0)
        if isinstance(answer, DriverError):
            raise answer
        return answer

    written: list[bytes] = []
    said: list[str] = []
    await within(
        follow(read, "t", "stdout", Lines(b"", written.append), ended, said.append, 0.01), 10
    )
    assert b"".join(written) == b"done\n", said
