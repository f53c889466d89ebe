"""Review 58: a removed framework's tasks keep their room "until the slave says they
ended (or 75 s)" (`master.dying.HELD_AT_MOST`) -- 75 s from the removal, not from when
the slave hears of it. A slave away when the framework was torn down (a partition; its
connection lost and not yet past the slave timeout) hears of it only when it comes back:
`_reconcile_slave` tells it again (the removed framework's tasks it names), and the
tasks then begin their kill grace (up to a minute) -- but their hold lapsed while the
slave was away, and "nothing is held for them". The room, and the ports they are bound
to, are offered to the next tenant as the slave comes back, beside tasks that still run.

In process, on the memory transport (the fixtures of tests/test_framework_ids.py), with
HELD_AT_MOST 0.5 s for 75; the slave says nothing after the ShutdownFramework, as a real
slave says nothing while the tasks are in their grace."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_framework_ids import TASK, cluster, run_tasks

from master import dying
from protocol.wire.messages import ShutdownFramework, Teardown

from harness.helpers import eventually


async def test_a_slave_told_of_a_teardown_as_it_comes_back_keeps_the_room_for_the_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dying, "HELD_AT_MOST", 0.5)
    async with cluster(tmp_path) as c:
        alice = await c.framework("alice")
        fid = (await alice.subscribe("a", role="alice")).framework_id
        await run_tasks(c, alice, 3)
        assert c.held("sa") == TASK.scaled(3)
        c.slave.ends_shut_down_frameworks = False  # (its tasks in their grace: not ended)
        master = c.master
        master.removals.disconnect_slave(master.books.slaves["sa"], "a partition")
        await alice.bus.publish(alice.to_master, Teardown(framework_id=fid))
        await eventually(lambda: fid not in master.books.frameworks)
        await eventually(lambda: not master.books.dying)  # (its 0.5 s passed, the slave away)

        told = len(c.slave.inbox.of(ShutdownFramework))
        await c.reregister()  # (back, its tasks of alice's still running: it missed it all)
        again = await c.slave.inbox.wait_count(ShutdownFramework, told + 1)
        assert again[-1].framework_id == fid  # (told now: their grace begins now)
        held = c.held("sa")
        assert held == TASK.scaled(3), (
            f"the slave has just been told to shut {fid} down and its 3 tasks begin their "
            f"grace; the master holds {held} of the slave for them and offers the rest"
        )
