"""Review 57: orphans that all end at once leak their executor's resources for good.

After a restart without the registry, alice's two tasks come back with their slave as
orphans running in one executor of hers; the first orphan holds the executor's resources
(`_holding_executor`). When the slave next registers naming neither (both ended while
alice was away), `SlaveCalls._orphans_not_named` walks the two it found gone: the first
passes its executor hold to "an orphan still running in it" -- the second, which is gone
too, but still in the books at that moment -- and frees only its task; the second is then
freed as the list had it before (its task alone). Nobody frees the executor's resources:
they stay held by nobody, offered to no one, until the slave is removed. A tenant that sets
its executor's resources large (an ExecutorInfo is the framework's to write) and lets its
tasks end after such a restart takes that much of a slave from everybody for as long as
the slave lives. (tests/test_framework_ids.py ends the two one re-registration apart.)

In process, on the memory transport (the fixtures of tests/test_framework_ids.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_framework_ids import EXEC, TASK, cluster

from protocol.wire.messages import CommandInfo, ExecutorInfo
from protocol.wire.resources import Resources

from harness.helpers import eventually

pytestmark = pytest.mark.timeout(60)


async def test_orphans_of_one_executor_ending_together_free_the_executor_too(
    tmp_path: Path,
) -> None:
    async with cluster(tmp_path) as c:
        alice = await c.framework("alice")
        await alice.subscribe("a", role="alice", failover_timeout=60)
        offer = await alice.next_offer()
        executor = ExecutorInfo(executor_id="e", command=CommandInfo(value="x"), resources=EXEC)
        tasks = [
            alice.task(offer, TASK, f"t{i}").model_copy(
                update={"executor": executor, "command": None}
            )
            for i in range(2)
        ]
        await alice.accept(offer, tasks)
        for _ in tasks:
            await c.slave.run_task()
        await c.restart_master()
        await c.reregister()
        assert c.held("sa") == TASK.scaled(2) + EXEC
        await c.reregister(runs=[])  # (both ended while alice was away)
        await eventually(lambda: not c.master.books.orphans)
        held = c.held("sa")
        assert held == Resources(), (
            f"with no task left on the slave, {held} of it is still held by nobody (the "
            f"executor's resources were {EXEC})"
        )
