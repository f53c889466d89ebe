"""Conformance: one test for each row of the task-state table (examples/task-states.md).

Each runs a framework through the SDK, once partition-aware and once not, and checks the
(state, reason, source) it hears. The rows the master and a slave decide between them run
in process (`in_process`: a master and slaves on the memory transport; tasks and executors
are still real processes). The rows about slaves that die, are partitioned or are marked
gone by the `drfmesos` command run a real cluster -- mosquitto, a master and slave
processes (`live`): partitions are real, the slave process is stopped with SIGSTOP (its
heartbeats stop, its tasks go on) and continued with SIGCONT.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cluster.local.launcher import Launcher, Party
from cluster.local.view import wait_state
from frameworks import SchedulerDriver, build_task
from master.master import MasterConfig
from protocol.tooling.brokers import BrokerURL, MosquittoBroker
from protocol.transport.base import Connector
from protocol.wire.messages import (
    CommandInfo,
    ExecutorInfo,
    MarkSlaveGone,
    Offer,
    Reason,
    Source,
    State,
    TaskInfo,
    TaskState,
    TaskStatus,
)
from protocol.wire.resources import Resources

from harness.helpers import InProcess, Recorder, in_process_cluster, live_cluster

CLUSTER = "states"
SMALL = Resources(cpus=0.5, mem=64)
MASTER_ARGS = [
    "--http",
    "127.0.0.1:0",  # (5050 is the demo's, which a test holds)
    "--allocation-interval",
    "0.1",
    "--heartbeat-interval",
    "0.5",
    "--slave-timeout",
    "3",
]
CONFIG = MasterConfig(allocation_interval=0.1, heartbeat_interval=0.5, slave_timeout=3.0)


@pytest.fixture(params=[False, True], ids=["lost", "partition-aware"])
def aware(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
async def live(mosquitto: MosquittoBroker, tmp_path: Path) -> AsyncIterator[Launcher]:
    async with live_cluster(
        mosquitto.url, CLUSTER, tmp_path, MASTER_ARGS, slave_args=HOST_PIDS
    ) as launcher:
        yield launcher


@pytest.fixture
async def in_process(tmp_path: Path) -> AsyncIterator[InProcess]:
    async with in_process_cluster(CLUSTER, tmp_path, CONFIG) as cluster:
        yield cluster


@contextlib.asynccontextmanager
async def framework(
    broker: MosquittoBroker | InProcess, aware: bool
) -> AsyncIterator[tuple[Recorder, SchedulerDriver]]:
    rec = Recorder()
    name = "aware" if aware else "plain"
    url: BrokerURL | Connector = (
        broker.url if isinstance(broker, MosquittoBroker) else broker.connect
    )
    driver = SchedulerDriver(rec, name=name, broker=url, cluster=CLUSTER, partition_aware=aware)
    await driver.start()
    try:
        yield rec, driver
    finally:
        driver.stop()
        await driver.join()


def seen(aware: bool, fine: TaskState) -> TaskState:
    """What a framework hears for `fine`: TASK_LOST unless it is partition-aware."""
    return fine if aware else TaskState.LOST


def slave_party(live: Launcher, slave_id: str) -> Party:
    """The process of the slave with this id (each keeps its id in its work dir)."""
    for party in live.parties:
        id_file = live.run_dir / party.name / "slave_id"
        if party.kind == "slave" and id_file.exists() and id_file.read_text().strip() == slave_id:
            return party
    raise AssertionError(f"no slave process has id {slave_id}")


# the tasks write their pid where this test reads it: the host's (no PID namespace), into
# this test's directory (as the slave's own user)
HOST_PIDS = ("--no-switch-user", "--no-pid-namespace")


def pid_task(offer: Offer, task_id: str, pid_file: Path, seconds: int = 60) -> TaskInfo:
    """A task that writes its pid, then sleeps: a test can tell whether it still runs."""
    return build_task(
        offer,
        task_id,
        SMALL,
        command=f"echo $$ > {pid_file}; exec sleep {seconds}",
        task_id=task_id,
    )


def pid_of(pid_file: Path) -> int:
    return int(pid_file.read_text())


async def running(rec: Recorder, driver: SchedulerDriver, tmp_path: Path) -> tuple[Offer, Path]:
    """Task t1 launched on the first offer and RUNNING: the offer, and t1's pid file."""
    offer = await rec.offer_on(driver)
    pid_file = tmp_path / "t1.pid"
    await driver.launch_tasks([offer.offer_id], [pid_task(offer, "t1", pid_file)])
    await rec.update("t1", TaskState.RUNNING)
    return offer, pid_file


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def gone_pid(pid_file: Path, timeout: float = 20.0) -> None:
    pid = pid_of(pid_file)
    async with asyncio.timeout(timeout):
        while alive(pid):  # noqa: ASYNC110 - another process's life: nothing to await
            await asyncio.sleep(0.1)


async def reason_after(rec: Recorder, task_id: str, before: int, reason: Reason) -> TaskStatus:
    """The first update of `task_id` with `reason` among those after the first `before`
    (a re-sent older update may arrive in between)."""

    def found() -> TaskStatus | None:
        return next((s for s in rec.of(task_id)[before:] if s.reason == reason), None)

    await rec.wait(lambda: found() is not None)
    status = found()
    assert status is not None
    return status


async def drfmesos(*args: str) -> str:
    """Run the `drfmesos` command (as an operator would, on this test's cluster)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cluster",
        *args[:2],
        "--cluster",
        CLUSTER,
        *args[2:],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0, out.decode()
    return out.decode()


def check(status: TaskStatus, state: TaskState, reason: Reason | None, source: Source) -> None:
    assert (status.state, status.reason, status.source) == (state, reason, source), status


# --- the rows ------------------------------------------------------------------------------


async def test_a_launch_on_an_unknown_offer_is_dropped_not_an_error(
    in_process: InProcess, aware: bool
) -> None:
    async with framework(in_process, aware) as (rec, driver):
        real = await rec.offer_on(driver)
        # an offer the master does not know (as after a failover, or rescinded in flight)
        stale = real.model_copy(update={"offer_id": "o-unknown-to-this-master"})
        driver.offers[stale.offer_id] = stale
        task = build_task(stale, "t", SMALL, command="true", task_id="t1")
        await driver.launch_tasks([stale.offer_id], [task])
        status = await rec.update("t1", seen(aware, TaskState.DROPPED))
        check(status, seen(aware, TaskState.DROPPED), Reason.INVALID_OFFERS, Source.MASTER)
        assert status.state.terminal
        assert status.state.retryable
        # reconciling it answers how it ended, not that it is unknown (a Reconcile sent on
        # reconnecting, behind the Accept, would otherwise give the task a second end)
        await driver.reconcile_tasks(
            [TaskStatus(task_id="t1", state=TaskState.STAGING, slave_id=stale.slave_id)]
        )
        known = await reason_after(rec, "t1", 1, Reason.RECONCILIATION)
        assert known.state == seen(aware, TaskState.DROPPED), known
        # retrying on a real offer works: the task description was fine
        retry = build_task(real, "t", SMALL, command="true", task_id="t1")
        await driver.launch_tasks([real.offer_id], [retry])
        await rec.update("t1", TaskState.FINISHED)
        assert rec.errors == []  # an Error would mean the framework was removed


async def test_an_accept_delivered_again_is_not_answered_again(
    in_process: InProcess, aware: bool
) -> None:
    """MQTT delivers at least once: the same Accept arriving a second time (a broker
    restart before its PUBACK) finds its offers used. Its running task is not reported
    TASK_LOST (the chaos soak saw one task LOST, then FINISHED)."""
    async with framework(in_process, aware) as (rec, driver):
        offer = await rec.offer_on(driver)
        task = build_task(offer, "t", SMALL, command="sleep 30", task_id="once")
        await driver.launch_tasks([offer.offer_id], [task])
        await rec.update("once", TaskState.RUNNING)
        driver.offers[offer.offer_id] = offer  # the same call again, as redelivered
        await driver.launch_tasks([offer.offer_id], [task])
        # a later call on a used offer is answered: once it is, the redelivered one was
        # handled before it (one framework's calls are handled in order)
        driver.offers[offer.offer_id] = offer
        other = build_task(offer, "t", SMALL, command="true", task_id="other")
        await driver.launch_tasks([offer.offer_id], [other])
        await rec.update("other", seen(aware, TaskState.DROPPED))
        assert rec.states("once") == [TaskState.STARTING, TaskState.RUNNING]


async def test_an_invalid_task_is_task_error_for_every_framework(
    in_process: InProcess, aware: bool
) -> None:
    async with framework(in_process, aware) as (rec, driver):
        offer = await rec.offer_on(driver)
        first = build_task(offer, "t", SMALL, command="sleep 30", task_id="same")
        await driver.launch_tasks([offer.offer_id], [first])
        await rec.update("same", TaskState.RUNNING)
        again = await rec.offer_on(driver)
        dup = build_task(again, "t", SMALL, command="true", task_id="same")
        await driver.launch_tasks([again.offer_id], [dup])
        status = await rec.update("same", TaskState.ERROR)
        check(status, TaskState.ERROR, Reason.TASK_INVALID, Source.MASTER)
        assert "already in use" in status.message
        assert status.state.terminal
        assert not status.state.retryable
        assert rec.errors == []


async def test_a_slave_that_dies_past_its_timeout_is_removed(
    live: Launcher, mosquitto: MosquittoBroker, aware: bool, tmp_path: Path
) -> None:
    async with framework(mosquitto, aware) as (rec, driver):
        offer, pid_file = await running(rec, driver, tmp_path)
        party = slave_party(live, offer.slave_id)
        party.proc.kill()  # kill -9: no goodbye, heartbeats stop
        try:
            status = await rec.update("t1", seen(aware, TaskState.UNREACHABLE))
            check(status, seen(aware, TaskState.UNREACHABLE), Reason.SLAVE_REMOVED, Source.MASTER)
            assert status.state.may_be_running  # and it does: nobody is left to kill it
            assert alive(pid_of(pid_file))
        finally:
            os.kill(pid_of(pid_file), signal.SIGKILL)


async def fail_over(live: Launcher, url: BrokerURL, args: list[str]) -> None:
    """The master restarted (on its work dir, in `args`), back with the framework, and its
    one slave (stopped by the test) still awaited."""
    master = next(p for p in live.parties if p.kind == "master")
    await live.stop(master)
    await live.start("master", "master", *args)
    await wait_state(
        url,
        CLUSTER,
        lambda s: s.recovering_slaves == 1 and any(f.active for f in s.frameworks),
    )


async def test_reconciliation_waits_for_a_slave_not_back_after_a_failover(
    mosquitto: MosquittoBroker, aware: bool, tmp_path: Path
) -> None:
    """A restarted master (on its work dir) answers nothing about a task on a slave of its
    registry that has not re-registered; once that slave's time is up, it is unreachable,
    and the ask made while it was recovering is answered so (`master.reconcile_waits`)."""
    args = [
        *MASTER_ARGS,
        "--work-dir",
        str(tmp_path / "master"),
        "--slave-reregister-timeout",
        "4",
    ]
    async with (
        live_cluster(mosquitto.url, CLUSTER, tmp_path, args, slave_args=HOST_PIDS) as live,
        framework(mosquitto, aware) as (rec, driver),
    ):
        offer = await rec.offer_on(driver)
        slave = slave_party(live, offer.slave_id)
        slave.proc.send_signal(signal.SIGSTOP)
        try:
            await fail_over(live, mosquitto.url, args)
            ask = [TaskStatus(task_id="t-x", state=TaskState.STAGING, slave_id=offer.slave_id)]
            await driver.reconcile_tasks(ask)
            await wait_state(
                mosquitto.url,
                CLUSTER,
                lambda s: s.recovering_slaves == 0 and len(s.slaves) == 1,
            )
            # no answer while it might come back; the ask is answered when its time is up
            answer = await rec.update("t-x", seen(aware, TaskState.UNREACHABLE))
            check(answer, seen(aware, TaskState.UNREACHABLE), Reason.RECONCILIATION, Source.MASTER)
        finally:
            slave.proc.send_signal(signal.SIGCONT)


async def test_an_ask_about_a_task_on_a_slave_not_back_yet_is_answered_when_it_is(
    mosquitto: MosquittoBroker, aware: bool, tmp_path: Path
) -> None:
    """A framework that reconciles with a new leader before its task's slave re-registered
    hears the task's state once the slave is back, without asking again (Mesos answers
    nothing then, and the framework's next ask comes seconds later)."""
    args = [*MASTER_ARGS, "--work-dir", str(tmp_path / "master")]
    async with (
        live_cluster(mosquitto.url, CLUSTER, tmp_path, args, slave_args=HOST_PIDS) as live,
        framework(mosquitto, aware) as (rec, driver),
    ):
        offer, pid_file = await running(rec, driver, tmp_path)
        slave = slave_party(live, offer.slave_id)
        slave.proc.send_signal(signal.SIGSTOP)  # it cannot re-register until let go
        try:
            await fail_over(live, mosquitto.url, args)
            before = len(rec.of("t1"))
            ask = [TaskStatus(task_id="t1", state=TaskState.RUNNING, slave_id=offer.slave_id)]
            await driver.reconcile_tasks(ask)
        finally:
            slave.proc.send_signal(signal.SIGCONT)
        answer = await reason_after(rec, "t1", before, Reason.RECONCILIATION)
        check(answer, TaskState.RUNNING, Reason.RECONCILIATION, Source.MASTER)
        os.kill(pid_of(pid_file), signal.SIGKILL)


async def test_an_unreachable_slave_that_returns(
    live: Launcher, mosquitto: MosquittoBroker, aware: bool, tmp_path: Path
) -> None:
    """Partition-aware: the task carries on and reports TASK_RUNNING again (and one it asked
    to kill meanwhile is killed then). Otherwise: it was reported lost, so it is killed
    when its slave returns (as Mesos before 1.5: mesos-differences.md)."""
    async with framework(mosquitto, aware) as (rec, driver):
        offer = await rec.offer_on(driver)
        pids = {t: tmp_path / f"{t}.pid" for t in ("t1", "t2")}
        await driver.launch_tasks(
            [offer.offer_id], [pid_task(offer, t, pid) for t, pid in pids.items()]
        )
        await rec.update("t1", TaskState.RUNNING)
        await rec.update("t2", TaskState.RUNNING)
        party = slave_party(live, offer.slave_id)
        party.proc.send_signal(signal.SIGSTOP)  # a partition: the slave is silent, the task runs
        try:
            status = await rec.update("t1", seen(aware, TaskState.UNREACHABLE))
            check(status, seen(aware, TaskState.UNREACHABLE), Reason.SLAVE_REMOVED, Source.MASTER)
            assert alive(pid_of(pids["t1"]))
            if aware:  # a kill it cannot pass on yet: answered as reconciliation
                await rec.update("t2", TaskState.UNREACHABLE)
                before = len(rec.of("t2"))
                await driver.kill_task("t2", offer.slave_id)
                answer = await reason_after(rec, "t2", before, Reason.RECONCILIATION)
                check(answer, TaskState.UNREACHABLE, Reason.RECONCILIATION, Source.MASTER)
        finally:
            party.proc.send_signal(signal.SIGCONT)
        if aware:
            back = await reason_after(rec, "t1", 0, Reason.SLAVE_REREGISTERED)
            check(back, TaskState.RUNNING, Reason.SLAVE_REREGISTERED, Source.MASTER)
            assert alive(pid_of(pids["t1"]))
            await rec.update("t2", TaskState.KILLED)  # the kill owed, once it was back
            await gone_pid(pids["t2"])
            await driver.kill_task("t1")
            await rec.update("t1", TaskState.KILLED)
        else:
            await gone_pid(pids["t1"])
            await gone_pid(pids["t2"])
            # one ending only: the kill on return is not a second update
            await wait_state(
                mosquitto.url,
                CLUSTER,
                lambda s: any(v.slave_id == offer.slave_id and v.tasks == 0 for v in s.slaves),
            )
            for task in pids:
                ends = [s.state for s in rec.of(task) if s.state.terminal]
                assert ends == [TaskState.LOST]
        assert rec.errors == []


async def test_a_slave_an_operator_marks_gone(
    live: Launcher, mosquitto: MosquittoBroker, aware: bool, tmp_path: Path
) -> None:
    async with framework(mosquitto, aware) as (rec, driver):
        offer, pid_file = await running(rec, driver, tmp_path)
        said = await drfmesos("slaves", "gone", "--broker", str(mosquitto.url), offer.slave_id)
        assert f"slave {offer.slave_id} marked gone" in said
        status = await rec.update("t1", seen(aware, TaskState.GONE_BY_OPERATOR))
        reason = Reason.SLAVE_REMOVED_BY_OPERATOR if aware else Reason.SLAVE_REMOVED
        check(status, seen(aware, TaskState.GONE_BY_OPERATOR), reason, Source.MASTER)
        # the slave may not come back, and what it still ran is killed
        await gone_pid(pid_file)
        state = await wait_state(mosquitto.url, CLUSTER, lambda s: len(s.slaves) == 1)
        assert offer.slave_id not in {s.slave_id for s in state.slaves}
        # reconciling an unknown task there: the slave is gone
        await driver.reconcile_tasks(
            [TaskStatus(task_id="never", state=TaskState.STAGING, slave_id=offer.slave_id)]
        )
        answer = await rec.update("never", seen(aware, TaskState.GONE_BY_OPERATOR))
        check(answer, seen(aware, TaskState.GONE_BY_OPERATOR), Reason.RECONCILIATION, Source.MASTER)


async def test_only_an_operator_may_mark_a_slave_gone(in_process: InProcess) -> None:
    async with framework(in_process, aware=False) as (rec, driver):
        offer = await rec.offer_on(driver)
        driver._call(MarkSlaveGone(slave_id=offer.slave_id))
        await rec.wait(lambda: bool(rec.errors))
        assert "may not send MarkSlaveGone" in rec.errors[0]
        state: State = in_process.master.views.state()
        assert len(state.slaves) == 2
        assert offer.slave_id in {s.slave_id for s in state.slaves}


async def test_an_executor_that_terminates_fails_its_tasks(
    in_process: InProcess, aware: bool
) -> None:
    async with framework(in_process, aware) as (rec, driver):
        offer = await rec.offer_on(driver)
        task = TaskInfo(
            task_id="t1",
            name="t",
            slave_id=offer.slave_id,
            resources=SMALL,
            executor=ExecutorInfo(
                executor_id="dies", command=CommandInfo(value="sleep 0.2; exit 3")
            ),
        )
        await driver.launch_tasks([offer.offer_id], [task])
        status = await rec.update("t1", TaskState.FAILED)
        check(status, TaskState.FAILED, Reason.EXECUTOR_TERMINATED, Source.SLAVE)
        assert status.state.retryable


async def test_reconciliation_of_known_and_unknown_tasks(
    live: Launcher, mosquitto: MosquittoBroker, aware: bool
) -> None:
    async with framework(mosquitto, aware) as (rec, driver):
        offer = await rec.offer_on(driver)
        await driver.launch_tasks(
            [offer.offer_id], [build_task(offer, "t", SMALL, command="sleep 60", task_id="t1")]
        )
        await rec.update("t1", TaskState.RUNNING)
        asked = [
            TaskStatus(task_id="t1", state=TaskState.STAGING, slave_id=offer.slave_id),
            TaskStatus(task_id="nowhere", state=TaskState.STAGING, slave_id=offer.slave_id),
            TaskStatus(task_id="nobody", state=TaskState.STAGING, slave_id="no-such-slave"),
        ]
        before = len(rec.of("t1"))
        await driver.reconcile_tasks(asked)
        known = await reason_after(rec, "t1", before, Reason.RECONCILIATION)
        check(known, TaskState.RUNNING, Reason.RECONCILIATION, Source.MASTER)
        nowhere = await rec.update("nowhere", seen(aware, TaskState.GONE))
        check(nowhere, seen(aware, TaskState.GONE), Reason.RECONCILIATION, Source.MASTER)
        nobody = await rec.update("nobody", seen(aware, TaskState.UNKNOWN))
        check(nobody, seen(aware, TaskState.UNKNOWN), Reason.RECONCILIATION, Source.MASTER)
        # killing a task the master does not know is reconciling it (as Mesos)
        await driver.kill_task("ghost", offer.slave_id)
        ghost = await rec.update("ghost", seen(aware, TaskState.GONE))
        check(ghost, seen(aware, TaskState.GONE), Reason.RECONCILIATION, Source.MASTER)

        # its slave partitioned past the timeout: the task, and one never heard of there
        party = slave_party(live, offer.slave_id)
        party.proc.send_signal(signal.SIGSTOP)
        try:
            await rec.update("t1", seen(aware, TaskState.UNREACHABLE))
            before = len(rec.of("t1"))
            asked = [
                asked[0],
                TaskStatus(task_id="elsewhere", state=TaskState.STAGING, slave_id=offer.slave_id),
            ]
            await driver.reconcile_tasks(asked)
            answer = await rec.update("elsewhere", seen(aware, TaskState.UNREACHABLE))
            check(answer, seen(aware, TaskState.UNREACHABLE), Reason.RECONCILIATION, Source.MASTER)
            known = await reason_after(rec, "t1", before, Reason.RECONCILIATION)
            check(known, seen(aware, TaskState.UNREACHABLE), Reason.RECONCILIATION, Source.MASTER)
        finally:
            party.proc.send_signal(signal.SIGCONT)
