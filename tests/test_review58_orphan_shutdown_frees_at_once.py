"""Review 58: a framework known only by its orphans, removed (its most failover timeout
passed since its first orphan came back: `Removals.expire_frameworks`; or an operator's
teardown: `remove_orphans`), has what its tasks hold freed at once
(`_shut_down_orphans` -> `release_unowned`), while its slave is only told to shut it down
and the tasks run on for their kill grace (up to a minute). Review 57's fix holds a
removed framework's room and ports until the slave says its tasks ended
(`master.dying`, `FrameworkShutDown`) -- for a framework the master knew; not for one
known by its orphans, the case a master restarted without its registry makes of every
framework.

In process, on the memory transport (the fixtures of
tests/test_review57_orphans_forever.py: --max-failover-timeout 1 s); the slave says
nothing after the ShutdownFramework, as a real slave says nothing while the tasks are in
their grace."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_framework_ids import TASK, cluster, run_tasks
from test_review57_orphans_forever import MAX_FAILOVER, WAITED

from harness.fakes import heartbeating, told_to_shut_down

pytestmark = pytest.mark.timeout(60)


async def test_an_orphaned_frameworks_tasks_in_their_grace_keep_their_room(
    tmp_path: Path,
) -> None:
    async with cluster(tmp_path, max_failover_timeout=MAX_FAILOVER) as c:
        mallory = await c.framework("mallory")
        mid = (await mallory.subscribe("m", role="mallory", failover_timeout=3600)).framework_id
        await run_tasks(c, mallory, 3)
        await c.restart_master()
        await c.reregister()
        assert c.held("sa") == TASK.scaled(3)  # (orphans, held by nobody)
        c.slave.ends_shut_down_frameworks = False  # (its tasks in their grace: not ended)
        told = told_to_shut_down(c.slave, mid)
        async with heartbeating(c.slave):  # (the slave stays: a live one heartbeats)
            await c.slave.inbox.wait_until(told, timeout=MAX_FAILOVER + WAITED)
            held = c.held("sa")  # (the slave has said nothing since: its tasks run on)
        assert held == TASK.scaled(3), (
            f"the orphaned framework {mid} was shut down and its 3 tasks, in their grace, "
            f"still run; the master holds {held} of the slave for them, free to offer"
        )
