"""Review 65 (on 58f0bdb): a stray is blamed on a task that did not leave it.

`Strays.stop` kills a stray listening on a port none of its user's live tasks was given,
and then fails "its task" (TASK_FAILED, CONTAINER_LIMITATION, "a process it left
listened on port ...") wherever its user runs one command task alone, whichever task
left it and whenever: it does not ask whether that task was even running when the
stray was started.

On review 63's slave (`--switch-user`, `--no-pid-namespace`, ports held, a pass every
0.2 s), honest alice runs a legacy service the way many are run: svc-1, given B+1,
daemonizes its server there (left to serve, as the strays' rule says) and watches it;
svc-2, given B+2, runs beside it. A rolling restart kills svc-1 (KillTask: TASK_KILLED);
its daemon, in a session of its own, outlives the kill. On the next pass the daemon is
killed (its port is given back: fair) and svc-2, started before it and never near it,
is failed: 'a process it left listened on port B+1 of the slave's range, not given to
it (its ports: B+2)'. The framework is told a lie and loses a healthy task.

Expected: the daemon goes; svc-2 runs on. Blame a task only for a stray it may have
started (one started after the task was, by its start time in /proc/PID/stat), or blame
none.

A real slave (as root, tasks as their principal's user) on mosquitto, review 63's rig."""

from __future__ import annotations

import contextlib
import os
import signal

import pytest

from protocol.wire.framework import Kill
from protocol.wire.messages import TaskState

from harness.helpers import eventually
from harness.ports import alive, ports, slave_with_range, stray_pid
from harness.ports import rig as rig
from harness.slave import Rig, port_server

pytestmark = pytest.mark.timeout(60)


async def test_a_stray_left_by_a_killed_task_does_not_fail_its_users_other_task(
    rig: Rig,
) -> None:
    base, slave = await slave_with_range(rig)
    alice = await rig.framework("alice")
    # svc-1: its server daemonized on its own port B+1, then it watches the server
    watch = (
        f"until /usr/bin/python3 -c 'import socket; socket.create_connection"
        f'(("127.0.0.1", {base + 1}), 1)\' 2>/dev/null; do sleep 0.05; done'
    )
    svc1 = (
        f"( PORT0={base + 1} PORTS=alice setsid {port_server()} & echo $! > daemon.pid ); "
        f"{watch}; touch up; sleep 600"
    )
    sandbox = await rig.launch(alice, svc1, "svc-1", discrete=ports(base + 1))
    try:
        await alice.update_for("svc-1", TaskState.RUNNING, timeout=20)
        await eventually(lambda: (sandbox / "up").exists(), timeout=10)
        await rig.launch(alice, f"PORTS=alice {port_server()}", "svc-2", discrete=ports(base + 2))
        await alice.update_for("svc-2", TaskState.RUNNING, timeout=20)
        daemon = stray_pid(sandbox, "daemon.pid")
        assert alive(daemon)
        kill = Kill(framework_id=alice.framework_id, task_id="svc-1")
        await alice.bus.publish(alice.to_master, kill)
        await alice.update_for("svc-1", TaskState.KILLED, timeout=20)
        # its daemon outlived the kill; the next pass takes it (its port is given back)
        await eventually(lambda: not alive(daemon), timeout=10)
        try:
            status = await alice.update_for("svc-2", TaskState.FAILED, timeout=2)
        except (TimeoutError, AssertionError):
            status = None  # (10 passes and more since the daemon went)
        assert status is None, (
            f"alice's svc-2 (given {base + 2}, running before svc-1's daemon went) "
            f"was failed for svc-1's leftover: {status.message if status else ''!r}"
        )
        running = [r for r in slave.tasks.values() if r.info.task_id == "svc-2"]
        assert [r.state for r in running] == [TaskState.RUNNING]
    finally:
        with contextlib.suppress(OSError, TypeError):
            os.kill(stray_pid(sandbox, "daemon.pid"), signal.SIGKILL)  # type: ignore[arg-type]
