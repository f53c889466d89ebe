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

from pathlib import Path

import pytest

from frameworks.scheduler import build_task
from protocol.wire.health import CommandCheck, HealthCheck, HealthCheckType
from protocol.wire.messages import Offer, TaskInfo
from protocol.wire.resources import Resources

from harness.trust import Hoarder, hoarding

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


def hoard(offer: Offer, n: int) -> TaskInfo:
    """Task h`n` of 0.001 CPUs with a padded health check; it runs an hour."""
    return build_task(
        offer,
        f"h{n}",
        TINY,
        command="hoard",
        data=b'{"duration": 3600}',
        health_check=padded_check(),
    )


async def test_a_tenants_live_tasks_health_checks_hold_no_more_than_their_number(
    tmp_path: Path,
) -> None:
    async with hoarding(tmp_path, Hoarder(hoard, TASKS, AT_ONCE)) as fw:
        held = sum(len(t.info.model_dump_json()) for t in fw.tasks.values())
        live = len(fw.tasks)
        assert held < live * KEPT_A_TASK, (
            f"mallory's {live} live tasks, {live * 0.001:g} CPUs, hold "
            f"{held / 2**20:.0f} MiB of the master's books (their health checks)"
        )
