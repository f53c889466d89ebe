"""The scheduler side of the SDK: `Scheduler` callbacks and the `SchedulerDriver` that owns I/O.

    class OneTask(Scheduler):
        async def resource_offers(self, driver, offers):
            for offer in offers:
                task = build_task(offer, "hello", Resources(cpus=0.5, mem=64),
                                  command="echo hello")
                driver.launch_tasks([offer.offer_id], [task])

        async def status_update(self, driver, status):
            if status.state.terminal:
                driver.stop()

    asyncio.run(SchedulerDriver(OneTask(), name="hello", broker="mqtt://127.0.0.1:1883").run())

As in pymesos, a framework author overrides callbacks and calls the driver; the driver
subscribes, re-subscribes with its framework id after a disconnect, acknowledges status
updates once `status_update` returns (unless told not to), and refuses misuse -- launching
on an offer that is gone, or more than an offer holds -- with an exception rather than a
silent drop. This module holds `Scheduler`, what its callbacks are given (`Driver`: the
calls a framework makes, which `frameworks.driver.SchedulerDriver` implements), and the
helpers that build tasks.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Literal, Protocol

from frameworks import callbacks
from frameworks.calls import Made
from protocol.wire.discrete import Discrete
from protocol.wire.messages import (
    CommandInfo,
    ContainerInfo,
    ExecutorInfo,
    Filters,
    HealthCheck,
    KillPolicy,
    Offer,
    OfferOperation,
    Preempting,
    TaskFileData,
    TaskGroup,
    TaskInfo,
    TaskRequest,
    TaskStatus,
)
from protocol.wire.resources import Resources
from protocol.wire.why import Why


class Driver(Protocol):
    """What a `Scheduler`'s callbacks are given: the calls a framework makes (each made
    when called, and awaitable: `frameworks.calls.Made`), and what it may read. The SDK's
    `SchedulerDriver` is one; so is a test's fake."""

    framework_id: str | None
    """Its id once subscribed (None before)."""
    principal: str
    """Who it is: the principal its credentials prove (without credentials, its name);
    what it reserves and makes is in this name (`cpus(ROLE,PRINCIPAL)`)."""
    offers: dict[str, Offer]
    """Its offers outstanding: offered and not yet used, declined or rescinded."""
    removed: str | None
    """Why the master removed the framework, once it has."""

    def launch_tasks(
        self, offer_ids: Iterable[str], tasks: list[TaskInfo], filters: Filters | None = None
    ) -> Made: ...
    def launch_group(
        self,
        offer_ids: Iterable[str],
        executor_id: str,
        tasks: list[TaskInfo],
        executor_resources: Resources | None = None,
        filters: Filters | None = None,
    ) -> Made: ...
    def accept_offers(
        self,
        offer_ids: Iterable[str],
        tasks: list[TaskInfo],
        filters: Filters | None = None,
        operations: list[OfferOperation] | None = None,
        groups: list[TaskGroup] | None = None,
    ) -> Made: ...
    def decline_offer(self, offer_id: str, filters: Filters | None = None) -> Made: ...
    def decline_offers(self, offer_ids: Iterable[str], filters: Filters | None = None) -> Made: ...
    def revive_offers(self, roles: Iterable[str] = ()) -> Made: ...
    def suppress_offers(self, roles: Iterable[str] = ()) -> Made: ...
    def request_resources(
        self, requests: Iterable[TaskRequest | tuple[Resources, int]]
    ) -> Made: ...
    def kill_task(
        self, task_id: str, slave_id: str | None = None, grace_period: float | None = None
    ) -> Made: ...
    def acknowledge_status_update(self, status: TaskStatus) -> Made: ...
    def reconcile_tasks(self, tasks: Iterable[TaskStatus | str] = ()) -> Made: ...
    def send_framework_message(self, executor_id: str, slave_id: str, data: bytes) -> Made: ...
    def stop(self, failover: bool = False) -> Made: ...
    async def read_file(
        self,
        task_id: str,
        name: Literal["stdout", "stderr"] = "stdout",
        *,
        offset: int = 0,
        length: int = 65536,
        timeout: float = 10.0,
    ) -> TaskFileData: ...
    async def why(self, timeout: float = 10.0) -> Why: ...
    async def update_framework(
        self,
        *,
        name: str | None = None,
        roles: Iterable[str] | None = None,
        failover_timeout: float | None = None,
        min_offer: Iterable[Resources] | None = None,
        partition_aware: bool | None = None,
        task_killing: bool | None = None,
        shared_resources: bool | None = None,
        timeout: float = 10.0,
    ) -> list[str]: ...


class Scheduler:
    """A framework's policy: override the callbacks you need (each an `async` no-op by
    default). The driver calls them one at a time, in order, with itself first."""

    async def registered(self, driver: Driver, framework_id: str, master_id: str) -> None:
        """Subscribed for the first time, as `framework_id` (keep it to come back after a
        crash, with `failover_timeout`)."""

    async def reregistered(self, driver: Driver, master_id: str) -> None:
        """Subscribed again (after a reconnect or a failover) with the same framework id."""

    async def disconnected(self, driver: Driver) -> None:
        """The connection to the bus was lost; the driver reconnects by itself."""

    async def resource_offers(self, driver: Driver, offers: list[Offer]) -> None:
        """One `Offer` per slave: launch tasks on it (`driver.launch_tasks`) or decline it
        (`driver.decline_offer`); one neither used nor declined stays yours, idle."""

    async def offer_rescinded(self, driver: Driver, offer_id: str) -> None:
        """An offer is no longer valid."""

    async def status_update(self, driver: Driver, status: TaskStatus) -> None:
        """A task changed state (`status.state`, `.reason`, `.message`, `.exit_code`); the
        driver acknowledges it when this returns, unless `implicit_acknowledgements=False`."""

    async def framework_message(
        self, driver: Driver, slave_id: str, executor_id: str, data: bytes
    ) -> None:
        """Opaque data from one of this framework's executors."""

    async def slave_lost(self, driver: Driver, slave_id: str) -> None:
        """A slave was removed; its tasks arrive as updates (TASK_LOST, or TASK_UNREACHABLE
        / TASK_GONE_BY_OPERATOR for a partition-aware framework)."""

    async def executor_lost(
        self, driver: Driver, executor_id: str, slave_id: str, status: int
    ) -> None:
        """An executor's process exited."""

    async def preempting(self, driver: Driver, event: Preempting) -> None:
        """These tasks will be killed in `event.deadline_seconds` so that a starving
        framework gets its fair share: checkpoint, or kill them yourself sooner. They end
        TASK_KILLED with REASON_TASK_PREEMPTED."""

    async def error(self, driver: Driver, message: str) -> None:
        """The master refused something this framework sent; or removed the framework
        (torn down, failover timeout passed, refused at subscribe), after which the
        driver stops (`driver.removed` then says why)."""


PYMESOS_NAMES = {
    "resourceOffers": "resource_offers",
    "offerRescinded": "offer_rescinded",
    "statusUpdate": "status_update",
    "frameworkMessage": "framework_message",
    "slaveLost": "slave_lost",
    "executorLost": "executor_lost",
}
"""pymesos's callbacks by our names: a scheduler written as for pymesos defines the first."""


def callbacks_problem(scheduler: Scheduler) -> str | None:
    """Why the driver could not call `scheduler`'s callbacks, or None: one written `def`,
    or one named as pymesos names it (`resourceOffers`) where ours (`resource_offers`) is
    not (`frameworks.callbacks`)."""
    return callbacks.problem(
        scheduler,
        Scheduler,
        PYMESOS_NAMES,
        "a pymesos scheduler runs as it is against the master's --http, docs/how-to/mesos.md",
    )


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
    kill_grace_period: float | None = None,
    health_check: HealthCheck | None = None,
    discrete: Discrete | None = None,
) -> TaskInfo:
    """A TaskInfo for `offer`'s slave: a shell command, or a task for a custom executor.
    `image`: a command task's container image, which the slave runs with podman.
    `kill_grace_period`: seconds between SIGTERM and SIGKILL whenever it is killed (its
    `kill_policy`; by default the slave's `--kill-grace`). `health_check`: how its health is
    checked (`HealthCheck`: an HTTP GET, a TCP connect, a command), by the slave for a
    command task, by its executor's driver for an executor's, killing it after its
    failures. `discrete`: the ports (and other range or
    set values) it takes out of the offer (`OfferPorts(offer).take(n)`), in its
    environment as PORT0, ..., PORTS; without it, a task whose `resources` count ports
    (the whole offer's, say) takes the lowest of the offer's."""
    if discrete is None and any(n in offer.discrete for n in resources):
        # it counts ports (say, the whole offer's resources) without naming them: the
        # lowest of the offer's (several tasks on one offer: OfferPorts hands them out)
        discrete = offer.discrete.take(
            {n: resources.get_millis(n) for n in resources if n in offer.discrete}
        )
    return TaskInfo(
        task_id=task_id or f"{name}-{uuid.uuid4().hex[:12]}",
        name=name,
        slave_id=offer.slave_id,
        resources=resources,
        command=CommandInfo(value=command) if command is not None else None,
        executor=executor,
        container=ContainerInfo(image=image) if image is not None else None,
        data=data,
        kill_policy=(
            KillPolicy(grace_period=kill_grace_period) if kill_grace_period is not None else None
        ),
        health_check=health_check,
        discrete=discrete or Discrete(),
    )


def offer_resources(offers: Iterable[Offer]) -> Resources:
    """What a set of offers holds in all."""
    return sum((o.resources for o in offers), Resources())
