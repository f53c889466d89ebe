"""Preemption on a live cluster (real master and slave processes, mosquitto), seen only
through the public SDK: the victim is warned before the kill, its task ends TASK_KILLED
with REASON_TASK_PREEMPTED, the starving framework gets the freed room, and a framework
at its fair share loses nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from cluster.local.launcher import Launcher
from cluster.local.view import wait_state
from frameworks import (
    Offer,
    Preempting,
    Reason,
    Resources,
    Scheduler,
    SchedulerDriver,
    TaskState,
    TaskStatus,
    build_task,
)
from protocol.tooling.brokers import MosquittoBroker

from harness.helpers import live_cluster, until

CLUSTER = "preempt"
TASK = Resources(cpus=1, mem=128)


class Runner(Scheduler):
    """Runs `sleep 300` tasks of TASK on offers, up to `limit`; remembers what it hears,
    with when (the driver's own clock)."""

    def __init__(self, name: str, limit: int, declare: int | None) -> None:
        self.name = name
        self.limit = limit
        self.declare = declare  # tasks to request_resources (None: declare nothing)
        self.launched = 0
        self.statuses: list[tuple[float, TaskStatus]] = []
        self.warnings: list[tuple[float, Preempting]] = []
        self.changed = asyncio.Event()

    async def registered(self, driver: SchedulerDriver, framework_id: str, master_id: str) -> None:
        if self.declare is not None:
            await driver.request_resources([(TASK, self.declare)] if self.declare else [])

    async def resource_offers(self, driver: SchedulerDriver, offers: list[Offer]) -> None:
        for offer in offers:
            tasks = []
            room = offer.resources
            while self.launched < self.limit and room.contains(TASK):
                self.launched += 1
                task_id = f"{self.name}-{self.launched}"
                tasks.append(build_task(offer, task_id, TASK, command="sleep 300", task_id=task_id))
                room = room - TASK
            if tasks:
                await driver.launch_tasks([offer.offer_id], tasks)
            else:
                await driver.decline_offer(offer.offer_id)

    async def status_update(self, driver: SchedulerDriver, status: TaskStatus) -> None:
        self.statuses.append((time.monotonic(), status))
        self.changed.set()

    async def preempting(self, driver: SchedulerDriver, event: Preempting) -> None:
        self.warnings.append((time.monotonic(), event))
        self.changed.set()

    def running(self) -> set[str]:
        latest: dict[str, TaskState] = {}
        for _, s in self.statuses:
            latest[s.task_id] = s.state
        return {t for t, state in latest.items() if state == TaskState.RUNNING}

    async def wait(self, condition: Callable[[], bool], timeout: float = 30.0) -> None:
        await until(self.changed, condition, timeout)


@pytest.fixture
async def live(mosquitto: MosquittoBroker, tmp_path: Path) -> AsyncIterator[Launcher]:
    master = ["--policy", "drf", "--allocation-interval", "0.2"]
    master += ["--preemption-timeout", "1", "--preemption-notice", "1"]
    async with live_cluster(
        mosquitto.url, CLUSTER, tmp_path, master, ["--kill-grace", "1"]
    ) as launcher:
        yield launcher


async def start(broker: MosquittoBroker, scheduler: Runner) -> SchedulerDriver:
    driver = SchedulerDriver(scheduler, name=scheduler.name, broker=broker.url, cluster=CLUSTER)
    await driver.start()
    return driver


async def test_a_starving_framework_gets_room_from_the_one_over_its_share(
    live: Launcher, mosquitto: MosquittoBroker
) -> None:
    # modest runs one task and wants nothing more: its fair share is what it holds
    modest = Runner("modest", limit=1, declare=0)
    # hog takes the other three CPUs and declares nothing: it wants whatever it gets
    hog = Runner("hog", limit=10, declare=None)
    late = Runner("late", limit=2, declare=2)
    drivers = []
    try:
        drivers.append(await start(mosquitto, modest))
        await modest.wait(lambda: len(modest.running()) == 1)
        drivers.append(await start(mosquitto, hog))
        await hog.wait(lambda: len(hog.running()) == 3)

        # late wants two tasks; fair shares (DRF, CPUs): modest 1/4 (all it wants), hog
        # and late 3/8 each. Nothing is free, so late starves; one of hog's tasks (its
        # youngest) may go, a second would put hog below its fair share.
        drivers.append(await start(mosquitto, late))
        await late.wait(lambda: len(late.running()) == 1)

        assert len(hog.warnings) == 1
        warned_at, warning = hog.warnings[0]
        assert [t.task_id for t in warning.tasks] == ["hog-3"]  # the youngest
        assert warning.deadline_seconds == 1
        killed = [(at, s) for at, s in hog.statuses if s.task_id == "hog-3" and s.state.terminal]
        assert len(killed) == 1
        killed_at, status = killed[0]
        assert status.state == TaskState.KILLED
        assert status.reason == Reason.TASK_PREEMPTED
        assert killed_at - warned_at >= 0.9  # the warning came a notice ahead of the kill
        assert late.statuses[0][1].slave_id == warning.tasks[0].slave_id  # the held node

        # modest, at its fair share, lost nothing and was never warned; hog kept the rest
        assert modest.warnings == []
        assert modest.running() == {"modest-1"}
        assert hog.running() == {"hog-1", "hog-2"}

        state = await wait_state(
            mosquitto.url,
            CLUSTER,
            lambda s: s.preemption is not None and s.preemption.tasks_preempted == 1,
        )
        assert state.preemption is not None
        assert state.preemption.in_flight == 0
        fair = {f.name: f.fair_share for f in state.frameworks}
        assert fair["modest"] == pytest.approx(0.25)
        assert fair["hog"] == pytest.approx(0.375)
        assert fair["late"] == pytest.approx(0.375)

        # and no more, over a window longer than timeout + notice: hog at 1/2 would drop
        # below 3/8 with one task fewer, and late at 1/4 is above half its 3/8
        later = time.time() + 3.0
        state = await wait_state(mosquitto.url, CLUSTER, lambda s: s.timestamp > later)
        assert state.preemption is not None
        assert state.preemption.tasks_preempted == 1
        assert len(hog.warnings) == 1
    finally:
        for driver in drivers:
            driver.stop()
            await driver.join()
