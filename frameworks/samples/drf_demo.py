"""The blog's sample framework: fixed-size tasks that sleep 20-40 s, launched on offers.

Each offer that fits at least one task gets one task (the blog's text: one task per round)
or as many as fit (`fill`, what the blog's code does); an offer too small is declined
with a filter, so it goes to the next framework in DRF order.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass

from frameworks.calls import ENDLESS
from frameworks.scheduler import Driver, Scheduler, build_task
from protocol import logs
from protocol.wire.messages import (
    CommandInfo,
    ExecutorInfo,
    Filters,
    Offer,
    Preempting,
    TaskInfo,
    TaskState,
    TaskStatus,
)
from protocol.wire.resources import Resources


@dataclass
class DemoConfig:
    name: str
    task_cpus: float = 0.5
    task_mem: float = 512
    duration: tuple[float, float] = (20.0, 40.0)  # seconds, uniform
    tasks_per_offer: str = "1"  # "1" or "fill"
    max_tasks: int | None = None  # stop after running this many
    time_scale: float = 1.0  # multiplies task durations and filters
    refuse_seconds: float = 5.0
    executor: str = "custom"  # "custom" (the blog's executor) or "command" (`sleep N`)
    seed: int | None = None

    @property
    def task(self) -> Resources:
        return Resources(cpus=self.task_cpus, mem=self.task_mem)


class DRFDemoScheduler(Scheduler):
    def __init__(self, config: DemoConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.launched = 0
        self.running: set[str] = set()
        self.finished = 0
        self.log = logs.get("drf-demo", framework=config.name)

    def executor_info(self) -> ExecutorInfo:
        command = f"{sys.executable} -m frameworks.samples.sleep_executor"
        return ExecutorInfo(
            executor_id=f"drf-demo-{self.config.name}", command=CommandInfo(value=command)
        )

    def fits(self, offer: Offer) -> int:
        task = self.config.task
        n = None
        for name, amount in task.items():
            have = offer.resources.get(name, 0.0)
            k = int(have // amount + 1e-9)
            n = k if n is None else min(n, k)
        return n or 0

    async def registered(self, driver: Driver, framework_id: str, master_id: str) -> None:
        await self.declare(driver)

    async def reregistered(self, driver: Driver, master_id: str) -> None:
        await self.declare(driver)

    async def declare(self, driver: Driver) -> None:
        """Tell the master what we still want: endless work, or what is left of max_tasks."""
        left = ENDLESS if self.config.max_tasks is None else self.config.max_tasks - self.launched
        await driver.request_resources([(self.config.task, left)] if left > 0 else [])

    async def preempting(self, driver: Driver, event: Preempting) -> None:
        self.log.info(
            "preempting", tasks=[t.task_id for t in event.tasks], deadline=event.deadline_seconds
        )

    async def resource_offers(self, driver: Driver, offers: list[Offer]) -> None:
        filters = Filters(refuse_seconds=self.config.refuse_seconds * self.config.time_scale)
        for offer in offers:
            n = self.fits(offer)
            if self.config.tasks_per_offer != "fill":
                n = min(n, int(self.config.tasks_per_offer))
            if self.config.max_tasks is not None:
                n = min(n, self.config.max_tasks - self.launched)
            if n <= 0:
                await driver.decline_offer(offer.offer_id, filters)
                continue
            tasks = [self._task(offer) for _ in range(n)]
            self.launched += n
            self.running.update(t.task_id for t in tasks)
            self.log.info("launch", slave_id=offer.slave_id, tasks=n, offer_id=offer.offer_id)
            await driver.launch_tasks([offer.offer_id], tasks, filters)

    def _task(self, offer: Offer) -> TaskInfo:
        lo, hi = self.config.duration
        seconds = self.rng.uniform(lo, hi) * self.config.time_scale
        data = json.dumps({"duration": round(seconds, 3)}).encode()
        if self.config.executor == "command":
            return build_task(
                offer, self.config.name, self.config.task, command=f"sleep {seconds:.3f}", data=data
            )
        return build_task(
            offer, self.config.name, self.config.task, executor=self.executor_info(), data=data
        )

    async def status_update(self, driver: Driver, status: TaskStatus) -> None:
        if not status.state.terminal:
            return
        self.running.discard(status.task_id)
        self.finished += 1
        if status.state is TaskState.FINISHED:
            self.log.info(
                "task.done", task_id=status.task_id, state=status.state.value,
                running=len(self.running),
            )  # fmt: skip
        else:  # (why, where a team sees it: its slave's message, at --log-level warning too)
            self.log.warning(
                "task.done", task_id=status.task_id, state=status.state.value,
                running=len(self.running), reason=status.reason and status.reason.value,
                message=logs.clip(status.message),
            )  # fmt: skip
        if self.config.max_tasks is not None and self.finished >= self.config.max_tasks:
            await driver.stop()

    async def error(self, driver: Driver, message: str) -> None:
        self.log.warning("master.error", message=message)
