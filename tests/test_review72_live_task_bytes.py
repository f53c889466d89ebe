"""Review 72: a live task's opaque bytes are kept in the master's books, so a tenant's small
share of the CPUs holds as much of the master's memory as it likes.

Issue 45 (tests/test_master_memory.py) made an ended task keep "no command, environment,
image or data" in the master's books (`ended_info`): "a tenant's, up to a megabyte a
task". A live task still keeps its whole TaskInfo (`Framework.tasks[...].info`), though
the master reads none of that once the launch is sent (its kill policy aside): Mesos's
master keeps a `Task`, which carries no command and no data. A task costs its framework
what its resources say; the bytes beside them cost it nothing. `TaskInfo.data` has no
bound of its own (an Accept's is 1 MiB), and a task may ask for 0.001 of a CPU.

The attacker: mallory launches tasks of 0.001 CPUs, each with 300 KiB of data that its
executor (here a simulated one) never needs, and keeps them running. 400 of them, 0.4 of a
CPU of its share, hold 117 MiB in the master; a CPU's worth of tasks of a megabyte each
(one an Accept) would hold a gigabyte, eight CPUs eight: the master runs out of memory
long before mallory's share is spent, and every tenant's offers with it.

What a tenant relies on: what another tenant's live tasks cost the master grows with
their number (their resources), not with bytes they choose to carry.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from frameworks.scheduler import build_task
from protocol.wire.messages import Offer, TaskInfo
from protocol.wire.resources import Resources

from harness.trust import Hoarder, hoarding

pytestmark = pytest.mark.timeout(120)
TASKS = 400
PAD = 300 * 1024  # bytes of data a task (3 of them in one Accept of under 1 MiB)
TINY = Resources(cpus=0.001)
KEPT_A_TASK = 8 * 1024  # what a live task's record may hold: ids, name, resources, ...


def hoard(offer: Offer, n: int) -> TaskInfo:
    """Task h`n` of 0.001 CPUs carrying PAD bytes of data; it runs an hour (a simulated
    task reads its duration there)."""
    data = json.dumps({"duration": 3600, "pad": "x" * PAD}).encode()
    return build_task(offer, f"h{n}", TINY, command="hoard", data=data)


async def test_a_tenants_live_tasks_hold_no_more_of_the_master_than_their_number(
    tmp_path: Path,
) -> None:
    async with hoarding(tmp_path, Hoarder(hoard, TASKS, at_once=3)) as fw:
        held = sum(
            len(t.info.data) + len(t.info.command.value if t.info.command else "")
            for t in fw.tasks.values()
        )
        live = len(fw.tasks)
        cpus = sum(t.resources.get("cpus") or 0.0 for t in fw.tasks.values())
        assert held < live * KEPT_A_TASK, (
            f"mallory's {live} live tasks, {cpus:g} CPUs, hold {held / 2**20:.0f} "
            "MiB of opaque data in the master's books"
        )
