"""Review 58: a framework that kills its tasks and then tears down -- the usual way a
scheduler shuts down, and a tenant's way on purpose -- has their room and ports freed at
once, while they run on for their kill grace: the slave's `_on_shutdown_framework` waits
only for the kills IT starts, and a kill of a task already in its grace returns at once
(`ProcessRunner.kill`: "the first kill's wait ends it"), so `FrameworkShutDown` goes to
the master straight away and `Removals.release_dying` frees it all. The room is offered to
the next tenant beside a task still using it (review 57's teardown finding, back by
one Kill sent first).

On a real slave and broker (the rig of tests/test_slave.py): a task that traps SIGTERM and
runs on, its kill policy's grace 10 s."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.wire.messages import Kill, KillPolicy, TaskState, Teardown
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.slave import Rig, T
from harness.slave import rig as rig

pytestmark = pytest.mark.timeout(60)
GRACE = 10.0
SLAVE = Resources(cpus=2, mem=1024)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


async def test_a_task_killed_just_before_its_teardown_keeps_its_room_until_it_ends(
    rig: Rig,
) -> None:
    fw = await rig.framework()
    await rig.start_slave("s1", SLAVE)
    sandbox = await rig.launch(
        fw,
        "trap 'echo term > term' TERM; echo $$ > pid; while :; do sleep 0.05; done",
        "stubborn",
        Resources(cpus=1, mem=256),
        kill_policy=KillPolicy(grace_period=GRACE),
    )
    await fw.update_for("stubborn", TaskState.RUNNING)
    await eventually(lambda: (sandbox / "pid").exists() and bool((sandbox / "pid").read_text()))
    pid = int((sandbox / "pid").read_text())
    master, to_master = rig.master, T.inbound("framework", "framework")
    await fw.bus.publish(to_master, Kill(framework_id=fw.framework_id, task_id="stubborn"))
    await eventually(lambda: (sandbox / "term").exists())  # (SIGTERM: its grace begins)
    await fw.bus.publish(to_master, Teardown(framework_id=fw.framework_id))
    await eventually(lambda: fw.framework_id not in master.books.frameworks)

    # until the room is free again, or the task has ended
    await eventually(
        lambda: master.allocator.free("s1") == SLAVE or not alive(pid), timeout=GRACE + 20
    )
    freed_while_running = master.allocator.free("s1") == SLAVE and alive(pid)
    assert not freed_while_running, (
        f"the torn-down framework's task (pid {pid}) runs on in its {GRACE:g}s grace, and "
        f"its room is free already: {master.allocator.free('s1')} of {SLAVE}"
    )
