"""Review 64 (on 4ff0e56): a stray outlives its task, and then nothing holds it.

`_stop_strays` looks for strays only among the users of the live command tasks
(`_task_users` of the tasks' groups). On review 63's slave (`--switch-user
--no-pid-namespace`, posix isolation, ports held), mallory's task is given port B+5,
double-forks a server there (a daemon on its own port: left to serve), and exits 0. Its
server is re-parented to init, in a session of its own: nothing kills it as its task
ends, and from then on its user runs no task here, so no pass looks at it. The master
has the port back and gives it to alice; alice's server cannot bind it (EADDRINUSE,
TASK_FAILED), and mallory's stray answers alice's clients on B+5 for as long as it likes.

Expected: a stray on a port of the slave's range that no task of its user was given is
killed whether or not its user runs a task here now, and B+5 is free for the next task
given it.

A real slave (as root, tasks as their principal's user) on mosquitto, review 63's rig."""

from __future__ import annotations

import socket

import pytest

from protocol.wire.messages import TaskState

from harness.helpers import eventually
from harness.ports import alive, kill, ports, reply, slave_with_range, stray_pid
from harness.ports import rig as rig
from harness.slave import Rig, port_server

pytestmark = pytest.mark.timeout(60)


async def test_a_stray_whose_user_runs_no_task_is_held_to_the_ports_all_the_same(
    rig: Rig,
) -> None:
    base, _ = await slave_with_range(rig)
    mallory = await rig.framework("mallory")
    # a server on its own port B+5 in a session of its own, its subshell gone: the task
    # exits once it answers (PORTS: what it answers with)
    daemon = (
        f"( PORT0={base + 5} PORTS=mallory setsid {port_server()} & echo $! > stray.pid ); "
        f"until /usr/bin/python3 -c 'import socket; socket.create_connection"
        f'(("127.0.0.1", {base + 5}), 1)\' 2>/dev/null; do sleep 0.05; done'
    )
    sandbox = await rig.launch(mallory, daemon, "daemon", discrete=ports(base + 5))
    try:
        # its task ended once the stray answered on B+5 (its loop says so), and the port is
        # free to the master; the stray may be gone already (the pass every 0.2 s): asking
        # it here raced that pass under load (the suite of 2026-12-07 11:25 lost the race)
        await mallory.update_for("daemon", TaskState.FINISHED, timeout=20)
        assert stray_pid(sandbox) is not None
        try:
            await eventually(lambda: not alive(stray_pid(sandbox)), timeout=5)
        except AssertionError:
            raise AssertionError(
                f"mallory's task ended; her stray on port {base + 5} lives on and answers "
                f"{reply(base + 5)!r} there: no pass looks at a user who runs no task"
            ) from None
        with socket.socket() as s:  # (the next task given it, alice's, binds it)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # (as http.server)
            s.bind(("127.0.0.1", base + 5))
            s.listen()
    finally:
        kill(stray_pid(sandbox))
