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
silent drop. The callbacks and the driver that calls them are in `frameworks.driver`;
this module holds the helpers that build tasks, and names `Scheduler` beside them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from frameworks.driver import Scheduler as Scheduler  # (named beside its helpers)
from protocol.wire.discrete import Discrete
from protocol.wire.messages import (
    CommandInfo,
    ContainerInfo,
    ExecutorInfo,
    HealthCheck,
    KillPolicy,
    Offer,
    TaskInfo,
)
from protocol.wire.resources import Resources


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
    `kill_policy`; by default the slave's `--kill-grace`). `health_check`: how the slave
    checks a command task's health (`HealthCheck`: an HTTP GET, a TCP connect, a
    command), killing it after its failures. `discrete`: the ports (and other range or
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
