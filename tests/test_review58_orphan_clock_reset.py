"""Review 58: a framework known only by its orphans is removed --max-failover-timeout
after "its first orphan came back" (`Orphans.since`) -- unless its slave re-registers
after the orphan holding their executor's resources has ended: `_orphans_not_named`
passes the executor hold on by removing the heir and adding it again
(`orphans.add(_holding_executor(heirs[0]), loop_time())`), and when the heir is the
framework's last orphan, the remove forgets when its first came back and the add starts
the clock again, from now. A tenant whose orphaned tasks run in one executor of its own
ends them one at a time (the executor is its code): each re-registration of the slave
between two ends gives them another whole --max-failover-timeout.

In process, on the memory transport (the fixtures of tests/test_framework_ids.py,
--max-failover-timeout 1 s as in tests/test_review57_orphans_forever.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_framework_ids import EXEC, TASK, cluster
from test_review57_orphans_forever import MAX_FAILOVER

from protocol.wire.messages import CommandInfo, ExecutorInfo

from harness.helpers import eventually

pytestmark = pytest.mark.timeout(60)


async def test_an_executor_hold_passed_on_does_not_restart_the_orphans_clock(
    tmp_path: Path,
) -> None:
    async with cluster(tmp_path, max_failover_timeout=MAX_FAILOVER) as c:
        mallory = await c.framework("mallory")
        mid = (await mallory.subscribe("m", role="mallory", failover_timeout=3600)).framework_id
        offer = await mallory.next_offer()
        executor = ExecutorInfo(executor_id="e", command=CommandInfo(value="x"), resources=EXEC)
        tasks = [
            mallory.task(offer, TASK, f"t{i}").model_copy(
                update={"executor": executor, "command": None}
            )
            for i in range(2)
        ]
        await mallory.accept(offer, tasks)
        runs = [await c.slave.run_task() for _ in tasks]
        await c.restart_master()
        await c.reregister()
        orphans = c.master.books.orphans
        came_back = asyncio.get_running_loop().time()  # (its first orphan: by now)
        assert mid in orphans.since(came_back)
        holder = next(o for o in orphans.of(mid) if o.holds_executor)
        left = [r for r in runs if r.task.task_id != holder.task.task_id]
        await c.reregister(runs=left)  # (the holder ended; the other runs on)
        await eventually(lambda: len(orphans.of(mid)) == 1)
        assert mid in orphans.since(came_back), (
            f"the clock of {mid}'s orphans restarted at the slave's re-registration: its "
            "orphan is removed a whole --max-failover-timeout later than its first return says"
        )
