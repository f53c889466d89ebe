"""Run one shell command N times, wherever offers allow, and report each result."""

from __future__ import annotations

from collections.abc import Callable

from frameworks.scheduler import Driver, Scheduler, build_task
from protocol.wire.messages import Filters, Offer, TaskState, TaskStatus
from protocol.wire.resources import Resources


class CommandScheduler(Scheduler):
    def __init__(
        self,
        name: str,
        command: str,
        count: int,
        resources: Resources,
        echo: Callable[[str], None] = print,
    ) -> None:
        self.name = name
        self.command = command
        self.count = count
        self.resources = resources
        self.echo = echo
        self.launched = 0
        self.results: dict[str, TaskStatus] = {}

    @property
    def ok(self) -> bool:
        return all(s.state == TaskState.FINISHED for s in self.results.values())

    async def registered(self, driver: Driver, framework_id: str, master_id: str) -> None:
        await driver.request_resources([(self.resources, self.count)])

    async def resource_offers(self, driver: Driver, offers: list[Offer]) -> None:
        for offer in offers:
            tasks = []
            free = offer.resources
            while self.launched < self.count and free.contains(self.resources):
                free = free - self.resources
                tasks.append(
                    build_task(
                        offer,
                        f"{self.name}-{self.launched}",
                        self.resources,
                        command=self.command,
                        task_id=f"{self.name}-{self.launched}",
                    )
                )
                self.launched += 1
            if tasks:
                await driver.launch_tasks([offer.offer_id], tasks)
            else:
                await driver.decline_offer(offer.offer_id, Filters(refuse_seconds=30))
        if self.launched >= self.count:
            await driver.suppress_offers()

    async def status_update(self, driver: Driver, status: TaskStatus) -> None:
        if not status.state.terminal:
            return
        self.results[status.task_id] = status
        self.echo(f"{status.task_id}  {status.state.value}  {status.message}")
        if len(self.results) >= self.count:
            await driver.stop()
