"""The framework SDK against a master and slaves in process on the memory transport (tasks
are real processes), and, for a framework process killed and restarted, on a live cluster
of real processes and a real broker. The frameworks use nothing but the public API
(`from frameworks import ...`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cluster.local.launcher import Launcher
from cluster.local.view import wait_state
from frameworks import (
    Driver,
    DriverError,
    Executor,
    ExecutorDriver,
    Filters,
    Offer,
    OfferOperation,
    Resources,
    Scheduler,
    SchedulerDriver,
    TaskInfo,
    TaskState,
    build_task,
)
from master.master import MasterConfig
from protocol.tooling.brokers import MosquittoBroker
from protocol.transport.aio import within
from protocol.wire.messages import State

from harness.helpers import InProcess, Recorder, framework, in_process_cluster, live_cluster

CLUSTER = "sdk"


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[InProcess]:
    async with in_process_cluster(CLUSTER, tmp_path, MasterConfig(allocation_interval=0.1)) as c:
        yield c


@pytest.fixture
async def live(mosquitto: MosquittoBroker, tmp_path: Path) -> AsyncIterator[Launcher]:
    async with live_cluster(
        mosquitto.url, CLUSTER, tmp_path, ["--allocation-interval", "0.1"]
    ) as launcher:
        yield launcher


async def test_a_framework_gets_offers_and_sees_its_task_run_then_finish(
    cluster: InProcess,
) -> None:
    rec = Recorder()
    async with framework(cluster, rec, "runner") as driver:
        await rec.wait(lambda: rec.offers)
        offer = rec.offers[0]
        assert offer.resources == Resources(cpus=2, mem=1024)
        task = build_task(offer, "t", Resources(cpus=1, mem=64), command="sleep 0.2", task_id="t1")
        await driver.launch_tasks([offer.offer_id], [task])
        await rec.wait(lambda: TaskState.FINISHED in rec.states("t1"))
        assert rec.states("t1") == [TaskState.STARTING, TaskState.RUNNING, TaskState.FINISHED]

        # misuse is refused on the spot, not dropped silently
        with pytest.raises(DriverError, match="not outstanding"):
            await driver.launch_tasks([offer.offer_id], [task])
        fresh = next(o for o in rec.offers if o.offer_id in driver.offers)
        too_big = build_task(fresh, "big", Resources(cpus=64), command="true")
        with pytest.raises(DriverError, match="needs cpus:64"):
            await driver.launch_tasks([fresh.offer_id], [too_big])


async def test_one_offer_id_or_one_task_given_alone_is_refused_saying_so(
    cluster: InProcess,
) -> None:
    """pymesos's `launchTasks(offer_id, tasks)` takes one offer id or a list; a newcomer
    from pymesos who gave ours one id alone was told `offers o, -, 3, e, ... are not
    outstanding` (its characters), and one task alone an AttributeError from inside the
    driver. Each is refused saying what to write, and the offer stays usable."""
    rec = Recorder()
    async with framework(cluster, rec, "hasty") as driver:
        await rec.wait(lambda: rec.offers)
        offer = rec.offers[0]
        task = build_task(offer, "t", Resources(cpus=0.5, mem=64), command="true", task_id="t1")
        with pytest.raises(DriverError, match=r"a list of offer ids \(\[offer.offer_id\]\)"):
            driver.launch_tasks(offer.offer_id, [task])
        with pytest.raises(DriverError, match=r"a list of offer ids \(\[offer.offer_id\]\)"):
            driver.decline_offers(offer.offer_id)
        with pytest.raises(DriverError, match=r"a list of tasks \(\[task\]\)"):
            driver.launch_tasks([offer.offer_id], task)  # type: ignore[arg-type]
        for call in (driver.revive_offers, driver.suppress_offers):  # (one role alone too)
            with pytest.raises(DriverError, match=r"a list of roles \(\['\*'\]\)"):
                call("*")
        driver.launch_tasks([offer.offer_id], [task])
        await rec.wait(lambda: TaskState.FINISHED in rec.states("t1"))


def test_one_role_resources_or_task_id_given_alone_is_refused_where_the_driver_is_made() -> None:
    """The same habit where the driver is made and in reconcile_tasks: `roles="eng"`
    subscribed in roles 'e', 'n' and 'g', `min_offer=Resources(...)` kept its field
    names, and `reconcile_tasks("t1")` asked about tasks 't' and '1' (the answers, each
    an unknown task, said nothing of t1). Each is refused saying what to write."""
    with pytest.raises(DriverError, match=r"a list of roles \(\['eng'\]\)"):
        SchedulerDriver(Scheduler(), name="eng", roles="eng")
    with pytest.raises(DriverError, match=r"min_offer takes a list of Resources"):
        SchedulerDriver(Scheduler(), name="eng", min_offer=Resources(cpus=1))  # type: ignore[arg-type]
    driver = SchedulerDriver(Scheduler(), name="eng", roles=["eng"])
    assert driver.roles == ["eng"]
    with pytest.raises(DriverError, match=r"reconcile_tasks takes a list of tasks"):
        driver.reconcile_tasks("t1")


def test_a_scheduler_written_as_for_pymesos_is_refused_at_once_saying_why() -> None:
    """A pymesos habit carried over: a callback written `def` was called, and every call
    failed inside the driver (`object NoneType can't be used in 'await' expression`, in
    a log line); one named `resourceOffers` was never called, and its framework sat on
    its offers in silence. The driver refuses either scheduler as it is made."""

    class Plain(Scheduler):
        def resource_offers(self, driver: Driver, offers: list[Offer]) -> None:  # type: ignore[override]
            pass

    class Camel(Scheduler):
        async def resourceOffers(self, driver: Driver, offers: list[Offer]) -> None:
            pass

    with pytest.raises(DriverError, match=r"Plain.resource_offers must be `async def`"):
        SchedulerDriver(Plain(), name="plain")
    with pytest.raises(DriverError, match=r"Camel defines resourceOffers.*resource_offers"):
        SchedulerDriver(Camel(), name="camel")

    class Both(Camel):  # a pymesos scheduler's method beside ours is its own business
        async def resource_offers(self, driver: Driver, offers: list[Offer]) -> None:
            pass

    SchedulerDriver(Both(), name="both")


def test_an_executor_written_as_for_pymesos_is_refused_at_once_saying_why() -> None:
    """As a scheduler's: an executor's `def launch_task` failed at every task inside the
    driver (`executor.handler_failed`, in a log line) and the task sat staging; one named
    `launchTask` was never called, the task staging just the same. The driver refuses
    either executor as it is made, naming the method and what to write."""

    class Plain(Executor):
        def launch_task(self, driver: ExecutorDriver, task: TaskInfo) -> None:  # type: ignore[override]
            pass

    class PlainShutdown(Executor):
        def shutdown(self, driver: ExecutorDriver) -> None:  # type: ignore[override]
            pass

    class Camel(Executor):
        async def launchTask(self, driver: ExecutorDriver, task: TaskInfo) -> None:
            pass

    class Both(Camel):  # a pymesos executor's method beside ours is its own business
        async def launch_task(self, driver: ExecutorDriver, task: TaskInfo) -> None:
            pass

    def driver(executor: Executor) -> ExecutorDriver:
        return ExecutorDriver(
            executor, channel_fd=0, slave_id="s", framework_id="f", executor_id="e"
        )

    with pytest.raises(DriverError, match=r"Plain.launch_task must be `async def`"):
        driver(Plain())
    with pytest.raises(DriverError, match=r"PlainShutdown.shutdown must be `async def`"):
        driver(PlainShutdown())
    with pytest.raises(
        DriverError, match=r"Camel defines launchTask, pymesos's name.*name it launch_task"
    ):
        driver(Camel())
    assert driver(Both()).executor_id == "e"


async def test_a_refused_launch_names_the_call_the_framework_made(cluster: InProcess) -> None:
    """launch_tasks, launch_group and accept_offers share one check, whose refusals all
    said `launch_tasks`: a framework that called launch_group with one task alone was told
    `launch_tasks takes a list of tasks` (or got pydantic's twelve validation errors), and
    its author looked for a call it never made. Each refusal names the call made."""
    rec = Recorder()
    async with framework(cluster, rec, "misnamed") as driver:
        await rec.wait(lambda: rec.offers)
        offer = rec.offers[0]
        task = build_task(offer, "t", Resources(cpus=1, mem=64), command="true")
        too_big = build_task(offer, "big", Resources(cpus=64), command="true", task_id="big")
        launches = {
            "launch_tasks": lambda ids, tasks: driver.launch_tasks(ids, tasks),
            "launch_group": lambda ids, tasks: driver.launch_group(ids, "ex", tasks),
            "accept_offers": lambda ids, tasks: driver.accept_offers(ids, tasks),
        }
        for call, launch in launches.items():
            with pytest.raises(DriverError, match=rf"^{call} takes a list of offer ids"):
                launch(offer.offer_id, [task])
            with pytest.raises(DriverError, match=rf"^{call} takes a list of tasks \(\[task\]\)"):
                launch([offer.offer_id], task)
            with pytest.raises(DriverError, match=rf"^{call} needs at least one offer$"):
                launch([], [task])
            with pytest.raises(DriverError, match=rf"^{call}: offers gone are not outstanding"):
                launch(["gone"], [task])
            with pytest.raises(DriverError, match=rf"^{call}: .*task big: needs cpus:64"):
                launch([offer.offer_id], [too_big])
        reserve = OfferOperation(type="RESERVE", resources=Resources.parse("cpus(r,):0.5"))
        with pytest.raises(DriverError, match=r"^accept_offers takes a list of operations"):
            driver.accept_offers([offer.offer_id], [], operations=reserve)  # type: ignore[arg-type]
        with pytest.raises(DriverError, match=r"^decline_offers: offers gone are not outstanding"):
            driver.decline_offers(["gone"])
        assert offer.offer_id in driver.offers  # nothing refused was sent


async def test_a_call_made_without_await_still_happens_and_stop_may_be_awaited(
    cluster: InProcess,
) -> None:
    rec = Recorder()
    driver = SchedulerDriver(rec, name="forgetful", broker=cluster.connect, cluster=CLUSTER)
    assert driver.role == "forgetful"  # no credentials: its own name, never '*'
    await driver.start()
    # (whom it subscribed with, as before the driver's link had its own module)
    assert (driver.master_id, driver.master_epoch) == (
        cluster.master.master_id,
        cluster.master.epoch,
    )
    await rec.wait(lambda: rec.offers)
    offer = rec.offers[0]
    task = build_task(offer, "t", Resources(cpus=0.5, mem=64), command="exit 4", task_id="t1")
    driver.launch_tasks([offer.offer_id], [task])  # (no await: it is made all the same)
    await rec.wait(lambda: TaskState.FAILED in rec.states("t1"))
    assert rec.statuses[-1].exit_code == 4
    await driver.stop()
    await within(driver.join(), 10)


def test_a_driver_configures_no_logging_for_the_process() -> None:
    """A library leaves logging to the program: its lines go through stdlib logging (so
    Python's default shows warnings on stderr), and nothing is configured."""
    program = """if True:
        import logging, structlog
        from frameworks import Executor, ExecutorDriver, Scheduler, SchedulerDriver
        driver = SchedulerDriver(Scheduler(), name="quiet")
        ExecutorDriver(Executor(), channel_fd=0, slave_id="s", framework_id="f", executor_id="e")
        assert not structlog.is_configured()
        assert logging.getLogger().handlers == []
        driver.log.info("driver.not_shown")
        driver.log.warning("driver.shown", n=1)
    """
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "driver.shown" in done.stderr
    assert "n=1" in done.stderr
    assert "not_shown" not in done.stderr


def test_a_callbacks_traceback_is_printed_once_where_logging_is_left_alone() -> None:
    """A framework author's bug in a callback is logged with its traceback; where the
    program configured no logging, stdlib printed it under the line, and the line carried
    it a second time, its newlines escaped (`exception='Traceback ...\\n  File ...'`)."""
    program = """if True:
        from frameworks import Scheduler, SchedulerDriver
        driver = SchedulerDriver(Scheduler(), name="buggy")
        try:
            raise ValueError("my bug")
        except ValueError:
            driver.log.exception("framework.callback_failed", callback="resource_offers")
    """
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("event='framework.callback_failed'")
    assert "callback='resource_offers'" in lines[0]
    assert "exc" not in lines[0]
    assert lines[1] == "Traceback (most recent call last):"
    assert done.stderr.count("Traceback") == 1
    assert lines[-1] == "ValueError: my bug"


async def test_decline_with_refuse_seconds_is_honoured(
    cluster: InProcess,
) -> None:
    rec = Recorder()
    async with framework(cluster, rec, "decliner") as driver:
        await rec.wait(lambda: len(rec.offers) >= 2)  # both slaves
        loop = asyncio.get_running_loop()
        declined = rec.offers[0]
        await driver.decline_offer(declined.offer_id, Filters(refuse_seconds=1.5))
        at = loop.time()
        await rec.wait(lambda: any(o.slave_id == declined.slave_id for o in rec.offers[2:]))
        assert loop.time() - at >= 1.4  # that slave came back only once the filter lapsed


async def test_several_offers_declined_in_one_call_share_its_filter(
    cluster: InProcess,
) -> None:
    rec = Recorder()
    async with framework(cluster, rec, "bulk-decliner") as driver:
        await rec.wait(lambda: len(rec.offers) >= 2)  # both slaves
        loop = asyncio.get_running_loop()
        first = rec.offers[:2]
        await driver.decline_offers([o.offer_id for o in first], Filters(refuse_seconds=1.5))
        at = loop.time()
        assert not driver.offers  # both are gone from the driver's outstanding offers
        await rec.wait(lambda: {o.slave_id for o in rec.offers[2:]} >= {o.slave_id for o in first})
        assert loop.time() - at >= 1.4  # neither slave came back before the filter lapsed
        with pytest.raises(DriverError, match="not outstanding"):
            await driver.decline_offers([first[0].offer_id])


async def test_kill_ends_a_running_task_as_killed(
    cluster: InProcess,
) -> None:
    rec = Recorder()
    async with framework(cluster, rec, "killer") as driver:
        await rec.wait(lambda: rec.offers)
        offer = rec.offers[0]
        task = build_task(
            offer, "k", Resources(cpus=0.5, mem=32), command="sleep 300", task_id="k1"
        )
        await driver.launch_tasks([offer.offer_id], [task])
        await rec.wait(lambda: TaskState.RUNNING in rec.states("k1"))
        await driver.kill_task("k1")
        await rec.wait(lambda: TaskState.KILLED in rec.states("k1"))


async def test_a_framework_killed_and_restarted_in_time_gets_its_tasks_back(
    live: Launcher, mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    id_file = tmp_path / "framework-id"
    program = Path(__file__).parent / "programs" / "failover_framework.py"

    async def start() -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            str(program),
            mosquitto.url.url,
            CLUSTER,
            str(id_file),
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.getcwd()},
        )

    async def until(proc: asyncio.subprocess.Process, line: str) -> None:
        assert proc.stdout is not None
        async with asyncio.timeout(30):
            while (got := (await proc.stdout.readline()).decode()) and line not in got:
                pass
        assert line in got

    first = await start()
    try:
        await until(first, "STATUS long-task TASK_RUNNING")
        first.send_signal(signal.SIGKILL)
        await first.wait()
        second = await start()
        try:
            await until(second, "STATUS long-task TASK_RUNNING REASON_RECONCILIATION")
        finally:
            second.terminate()
            await second.wait()
    finally:
        if first.returncode is None:
            first.kill()
            await first.wait()
    # the cluster shut down (its slave as a Mesos agent on SIGUSR1) ends the task too
    assert _running_under(tmp_path)
    await live.stop_all()
    assert _running_under(tmp_path) == []


def _running_under(directory: Path) -> list[int]:
    """Processes whose working directory is below `directory` (a task's is its sandbox)."""
    found = []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if proc.name.isdigit() and (proc / "cwd").resolve().is_relative_to(directory):
                found.append(int(proc.name))
    return found


async def test_two_frameworks_with_equal_demands_converge_to_equal_shares(
    cluster: InProcess,
) -> None:
    from frameworks.samples.drf_demo import DemoConfig, DRFDemoScheduler

    def demo(name: str) -> DRFDemoScheduler:
        return DRFDemoScheduler(
            DemoConfig(
                name=name,
                task_cpus=0.5,
                task_mem=128,
                duration=(0.5, 1.0),
                executor="command",
                refuse_seconds=0.2,
            )
        )

    async with (
        framework(cluster, demo("A"), "A", role="A"),
        framework(cluster, demo("B"), "B", role="B"),
    ):
        shares: list[tuple[float, float]] = []

        def balanced(state: State) -> bool:
            by_name = {f.name: f.dominant_share for f in state.frameworks}
            shares.append((by_name.get("A", 0.0), by_name.get("B", 0.0)))
            recent = shares[-10:]  # ten snapshots in a row, each within one task
            return len(recent) == 10 and all(abs(a - b) <= 0.13 and a > 0.3 for a, b in recent)

        await wait_state(cluster.connect, CLUSTER, balanced, timeout=60)
    a, b = shares[-1]
    assert abs(a - b) <= 0.13  # within one task (0.5 of 4 cpus)


async def test_a_callback_that_raises_is_logged_and_the_driver_goes_on(
    cluster: InProcess,
) -> None:
    """A scheduler's bug (here a newcomer's `TaskState.TASK_FINISHED`) must not stop the
    driver: its callbacks loop once died at the first, silently, logging it with a field
    named like the log line's own event, and the framework heard nothing more."""

    class Clumsy(Recorder):
        launched = False

        async def resource_offers(self, driver: SchedulerDriver, offers: list[Offer]) -> None:
            if not self.launched:
                self.launched = True
                task = build_task(offers[0], "t", Resources(cpus=1, mem=64), command="true")
                driver.launch_tasks([offers[0].offer_id], [task])
                raise AttributeError("TASK_FINISHED")  # the bug, after the launch
            await super().resource_offers(driver, offers)

    rec = Clumsy()
    async with framework(cluster, rec, "clumsy"):
        await rec.wait(lambda: any(s.state == TaskState.FINISHED for s in rec.statuses))


def test_a_driver_reads_its_broker_secret_ca_and_cluster_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the `drfmesos` command does: a tenant's shell set up for its tools runs its own
    framework on the secured cluster unchanged (the SDK used to ignore the secret and CA,
    and fail on the broker's certificate)."""
    secret = tmp_path / "alice"
    secret.write_text("s3cret\n")
    monkeypatch.setenv("DRFMESOS_BROKER", "mqtts://alice@127.0.0.1:28883")
    monkeypatch.setenv("DRFMESOS_SECRET_FILE", str(secret))
    monkeypatch.setenv("DRFMESOS_CA", str(tmp_path / "ca.pem"))
    monkeypatch.setenv("DRFMESOS_CLUSTER", "tryout")
    driver = SchedulerDriver(Scheduler(), name="env")
    assert driver.broker is not None
    assert (driver.broker.username, driver.broker.password) == ("alice", "s3cret")
    assert driver.broker.ca == str(tmp_path / "ca.pem")
    assert driver.broker.tls
    assert driver.topics.cluster == "tryout"
    # a URL given with its own secret keeps it
    given = SchedulerDriver(Scheduler(), name="env", broker="mqtts://bob:pw@127.0.0.1:28883")
    assert given.broker is not None
    assert given.broker.password == "pw"
