"""Review 65 (on 58f0bdb): after a slave's restart, a recovered task's own port is no
longer its user's.

`Strays._given(uid)` counts the ports of the live tasks whose principal's user is `uid`,
by `TaskUsers.known(principal)`: "without touching the disk: the user if this slave has
looked it up before". A restarted slave has looked up no one: it recovers its tasks
from their checkpoints and asks their principals' users again only for a new launch (or
a recovered health check). Until then every recovered task's ports are given to no user.

On review 63's slave (`--switch-user`, `--no-pid-namespace`, ports held, a pass every
0.2 s), honest alice's svc, given B+1, daemonizes its server there (a server on its own
port serves on, as the strays' rule says) and watches it. The slave restarts (an
upgrade: its tasks run on, and it recovers svc). On its first pass the daemon, on the
very port svc still holds, is a stray on a port given to none of alice's tasks and is
killed: alice's service is down though her task runs on, RUNNING.

Expected: a recovered task's ports are its user's: the daemon serves on after the
restart. (Learn each recovered task's principal's user at recovery, or judge strays
only for users whose principals are all known.)

A real slave (as root, tasks as their principal's user) on mosquitto, review 63's rig;
the slave is stopped (its tasks left running) and started again on its work dir."""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Any

import pytest

from protocol.tooling.ports import free_port
from protocol.transport.bus import Bus
from protocol.wire.discrete import Discrete, Ranges
from protocol.wire.messages import TaskState
from protocol.wire.resources import PORTS, Resources
from slave.slave import Slave, SlaveConfig

from harness.helpers import eventually
from harness.ports import alive, stray_pid
from harness.ports import rig as rig
from harness.slave import Rig, T, port_server

pytestmark = pytest.mark.timeout(60)


async def test_a_recovered_tasks_daemon_on_its_own_port_serves_on(rig: Rig) -> None:
    base = free_port(12)
    kw: dict[str, Any] = {
        "discrete": Discrete({PORTS: Ranges([(base, base + 9)])}),
        "ports_isolation": True,
        "ports_check_interval": 0.2,
        "switch_user": True,
        "pid_namespace": False,
    }
    # the first slave: stopped below with its tasks left running (as a slave's upgrade)
    async with contextlib.AsyncExitStack() as first:
        bus = await first.enter_async_context(
            Bus(
                rig.broker.url, name="s1", client_id="stest-s1-before",
                inbox=T.slave("slave", "s1"), persistent=True,
                will=(T.gone("slave", "slave"), "slave", "slave"),
            )
        )  # fmt: skip
        config = SlaveConfig(
            slave_id="s1", hostname="s1.local", resources=Resources(cpus=4, mem=2048),
            work_dir=rig.tmp / "s1", cluster=T.cluster, kill_grace=1.0,
            memory_check_interval=0.1, **kw,
        )  # fmt: skip
        before = Slave(bus, T, config)
        await before.start()
        await before.registered.wait()
        alice = await rig.framework("alice")
        watch = (
            f"until /usr/bin/python3 -c 'import socket; socket.create_connection"
            f'(("127.0.0.1", {base + 1}), 1)\' 2>/dev/null; do sleep 0.05; done'
        )
        svc = (
            f"( PORT0={base + 1} PORTS=alice setsid {port_server()} & echo $! > daemon.pid ); "
            f"{watch}; touch up; sleep 600"
        )
        given = Discrete({PORTS: Ranges([(base + 1, base + 1)])})
        sandbox = await rig.launch(alice, svc, "svc", discrete=given)
        try:
            await alice.update_for("svc", TaskState.RUNNING, timeout=20)
            await eventually(lambda: (sandbox / "up").exists(), timeout=10)
            daemon = stray_pid(sandbox, "daemon.pid")
            assert alive(daemon)
            await before.stop()  # (its tasks run on)
        except BaseException:
            await before.stop(kill_tasks=True)
            with contextlib.suppress(OSError, TypeError):
                os.kill(stray_pid(sandbox, "daemon.pid"), signal.SIGKILL)  # type: ignore[arg-type]
            raise
    try:
        after = await rig.start_slave("s1", Resources(cpus=4, mem=2048), **kw)
        recovered = [r for r in after.tasks.values() if r.info.task_id == "svc"]
        assert [r.state for r in recovered] == [TaskState.RUNNING]
        killed = True
        try:  # (10 passes and more)
            await eventually(lambda: not alive(daemon), timeout=2)
        except AssertionError:
            killed = False
        assert not killed, (
            f"after the slave's restart, alice's svc (given {base + 1}, recovered, "
            f"RUNNING) had its daemon on {base + 1} killed as a stray: a recovered task's "
            "principal's user is not known, so its ports are given to no user"
        )
    finally:
        with contextlib.suppress(OSError, TypeError):
            os.kill(stray_pid(sandbox, "daemon.pid"), signal.SIGKILL)  # type: ignore[arg-type]
