"""Review 73: a live task's health check still carries a tenant's bytes into the master's
books, around `kept_info` (review 72 #2).

`kept_info` leaves a live task's command, executor command, image and data out of the
master's record, "a tenant's, up to a megabyte a task, which the master never reads once
the launch is sent". But it keeps `health_check` whole, and a COMMAND check carries a
command of up to 64 KiB and an environment of up to 64 KiB: 128 KiB a task, kept as long as
it runs. The master never runs a check (the slave or the executor does).

The attacker: mallory launches tasks of 0.001 CPUs, each with a COMMAND health check whose
command and environment hold 63 KiB each, and keeps them running: 400 of them, 0.4 of a
CPU of its share, hold some 50 MiB of the master (review 72's hoarder did it with `data`); a
CPU's worth, 125 MiB, eight CPUs a gigabyte.

What a tenant relies on: what another tenant's live tasks cost the master grows with their
number (their resources), not with bytes they choose to carry.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from frameworks.driver import SchedulerDriver
from frameworks.scheduler import Driver, Scheduler, build_task
from protocol.wire.health import CommandCheck, HealthCheck, HealthCheckType
from protocol.wire.messages import Filters, Offer, TaskInfo
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.trust import Secure, T, secure_cluster

pytestmark = pytest.mark.timeout(120)
TASKS = 400
PAD = 63 * 1024  # bytes of a check's command, and of its environment (each at most 64 KiB)
AT_ONCE = 7  # tasks an Accept (under its 1 MiB)
TINY = Resources(cpus=0.001)
KEPT_A_TASK = 8 * 1024  # what a live task's record may hold: ids, name, resources, ...


def padded_check() -> HealthCheck:
    return HealthCheck(
        type=HealthCheckType.COMMAND,
        command=CommandCheck(value="true #" + "x" * PAD, environment={"PAD": "x" * PAD}),
        delay_seconds=3600,
    )


class Hoarder(Scheduler):
    """Launches tasks of 0.001 CPUs with a padded health check, AT_ONCE an offer, until TASKS."""

    def __init__(self) -> None:
        self.n = 0

    async def resource_offers(self, driver: Driver, offers: list[Offer]) -> None:
        check = padded_check()
        for offer in offers:
            tasks: list[TaskInfo] = []
            while self.n < TASKS and len(tasks) < AT_ONCE:
                self.n += 1
                tasks.append(
                    build_task(
                        offer,
                        f"h{self.n}",
                        TINY,
                        command="hoard",
                        data=b'{"duration": 3600}',
                        health_check=check,
                    )
                )
            if tasks:
                await driver.launch_tasks([offer.offer_id], tasks, Filters(refuse_seconds=0))
            else:
                await driver.decline_offer(offer.offer_id, Filters(refuse_seconds=60))


async def test_a_tenants_live_tasks_health_checks_hold_no_more_than_their_number(
    tmp_path: Path,
) -> None:
    sec: Secure
    async with secure_cluster("memory", tmp_path) as sec, contextlib.AsyncExitStack() as stack:
        mallory = SchedulerDriver(
            Hoarder(), name="mallory", broker=sec.connect("mallory"), cluster=T.cluster,
            role="mallory",
        )  # fmt: skip
        await mallory.start()
        stack.push_async_callback(mallory._close)
        fw = sec.master.books.frameworks[mallory.framework_id or ""]
        await eventually(lambda: len(fw.tasks) >= TASKS, timeout=60)
        held = sum(len(t.info.model_dump_json()) for t in fw.tasks.values())
        live = len(fw.tasks)
        assert held < live * KEPT_A_TASK, (
            f"mallory's {live} live tasks, {live * 0.001:g} CPUs, hold "
            f"{held / 2**20:.0f} MiB of the master's books (their health checks)"
        )
