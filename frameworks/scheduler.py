"""The scheduler side of the SDK: `Scheduler` callbacks and the `SchedulerDriver` that owns I/O.

    class OneTask(Scheduler):
        async def resource_offers(self, driver, offers):
            for offer in offers:
                task = build_task(offer, "hello", Resources(cpus=0.5, mem=64),
                                  command="echo hello")
                await driver.launch_tasks([offer.offer_id], [task])

        async def status_update(self, driver, status):
            if status.state.terminal:
                await driver.stop()

    asyncio.run(SchedulerDriver(OneTask(), name="hello", broker="mqtt://127.0.0.1:1883").run())

As in pymesos, a framework author overrides callbacks and calls the driver; the driver
subscribes, re-subscribes with its framework id after a disconnect, acknowledges status
updates once `status_update` returns (unless told not to), and refuses misuse -- launching
on an offer that is gone, or more than an offer holds -- with an exception rather than a
silent drop. This module is what an author writes against (the callbacks, and helpers
that build tasks); the driver is `frameworks.driver`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

from protocol.wire.messages import (
    CommandInfo,
    ContainerInfo,
    ExecutorInfo,
    Offer,
    Preempting,
    TaskInfo,
    TaskStatus,
)
from protocol.wire.resources import Resources

if TYPE_CHECKING:
    from frameworks.driver import SchedulerDriver


class Scheduler:
    """Override what you need; every callback is a no-op by default."""

    async def registered(self, driver: SchedulerDriver, framework_id: str, master_id: str) -> None:
        """Subscribed for the first time."""

    async def reregistered(self, driver: SchedulerDriver, master_id: str) -> None:
        """Subscribed again (after a reconnect or a failover) with the same framework id."""

    async def disconnected(self, driver: SchedulerDriver) -> None:
        """The connection to the bus was lost; the driver reconnects by itself."""

    async def resource_offers(self, driver: SchedulerDriver, offers: list[Offer]) -> None:
        """Launch tasks on offers, or decline them (an ignored offer stays yours)."""

    async def offer_rescinded(self, driver: SchedulerDriver, offer_id: str) -> None:
        """An offer is no longer valid."""

    async def status_update(self, driver: SchedulerDriver, status: TaskStatus) -> None:
        """A task changed state."""

    async def framework_message(
        self, driver: SchedulerDriver, slave_id: str, executor_id: str, data: bytes
    ) -> None:
        """Opaque data from one of this framework's executors."""

    async def slave_lost(self, driver: SchedulerDriver, slave_id: str) -> None:
        """A slave was removed; its tasks arrive as updates (TASK_LOST, or TASK_UNREACHABLE
        / TASK_GONE_BY_OPERATOR for a partition-aware framework)."""

    async def executor_lost(
        self, driver: SchedulerDriver, executor_id: str, slave_id: str, status: int
    ) -> None:
        """An executor's process exited."""

    async def preempting(self, driver: SchedulerDriver, event: Preempting) -> None:
        """These tasks will be killed in `event.deadline_seconds` so that a starving
        framework gets its fair share: checkpoint, or kill them yourself sooner. They end
        TASK_KILLED with REASON_TASK_PREEMPTED."""

    async def error(self, driver: SchedulerDriver, message: str) -> None:
        """The master refused something this framework sent; or removed the framework
        (torn down, failover timeout passed, refused at subscribe), after which the
        driver stops (`driver.removed` then says why)."""


def build_task(
    offer: Offer,
    name: str,
    resources: Resources,
    *,
    command: str | None = None,
    executor: ExecutorInfo | None = None,
    data: bytes = b"",
    task_id: str | None = None,
    image: str | None = None,
) -> TaskInfo:
    """A TaskInfo for `offer`'s slave: a shell command, or a task for a custom executor.
    `image`: a command task's container image, which the slave runs with podman."""
    return TaskInfo(
        task_id=task_id or f"{name}-{uuid.uuid4().hex[:12]}",
        name=name,
        slave_id=offer.slave_id,
        resources=resources,
        command=CommandInfo(value=command) if command is not None else None,
        executor=executor,
        container=ContainerInfo(image=image) if image is not None else None,
        data=data,
    )


def offer_resources(offers: Iterable[Offer]) -> Resources:
    """What a set of offers holds in all."""
    return sum((o.resources for o in offers), Resources())
