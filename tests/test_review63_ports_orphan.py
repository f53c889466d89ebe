"""Review 63 (on 2060393): the ports isolator loses a listener that its task double-forked.

slave.ports_isolator finds a task's processes by its process group, its own PID
namespace, and parentage (`_owner`: a process of no task's group is its parent's). On a
slave that switches users without a PID namespace for tasks (`--switch-user
--no-pid-namespace`, where ports are held by default), a task's process that leaves
its group (`setsid`) and its parent (a subshell that exits at once: the server is
re-parented to the host's init) belongs to no task: it listens on a port of the slave's
range it was not given, and nothing happens. It answers there for as long as its task
runs, squatting the port the next tenant is given (`$PORT0`), which that tenant's
server then cannot bind.

A stray is now known by its user (each principal's tasks run as a user of its own): one
listening on a port none of its user's tasks was given is killed, and so is its task
where its user runs one alone; a server a task daemonized on a port one of its user's
tasks was given is left to serve.

A real slave (as root, tasks as their principal's user) on mosquitto."""

from __future__ import annotations

import pytest

from protocol.tooling.ports import free_port
from protocol.wire.discrete import Discrete, Ranges
from protocol.wire.messages import Reason, TaskState, Update
from protocol.wire.resources import PORTS, Resources

from harness.helpers import eventually
from harness.ports import alive, answers, kill, ports, slave_with_range, stray_pid
from harness.ports import rig as rig
from harness.slave import Rig, port_server

pytestmark = pytest.mark.timeout(60)


def escape(port: int) -> str:
    """A command whose subshell starts a server on `port` in a session of its own, writes
    its pid to `stray.pid`, and exits: the server is re-parented to init."""
    return f"( PORT0={port} setsid {port_server()} & echo $! > stray.pid ); exec sleep 600"


async def test_a_double_forked_listener_is_held_to_its_tasks_ports(rig: Rig) -> None:
    base, _ = await slave_with_range(rig)
    mallory = await rig.framework("mallory")
    sandbox = await rig.launch(mallory, escape(base + 5), "escaped", discrete=ports(base + 3))
    try:
        # its user runs this task alone: the stray is its, and both are stopped
        escaped = await mallory.update_for("escaped", TaskState.FAILED, timeout=15)
        assert escaped.reason == Reason.CONTAINER_LIMITATION
        assert str(base + 5) in escaped.message
        await eventually(lambda: not alive(stray_pid(sandbox)))
        assert not answers(base + 5)
    finally:
        kill(stray_pid(sandbox))


async def test_a_server_a_task_daemonized_on_its_users_port_serves_on(rig: Rig) -> None:
    """With two tasks of one user, a stray on a port one of them was given serves on (a
    daemonizing server is no squatter); one on a port neither was given is killed, and
    neither task is failed for it (which one started it is not known)."""
    base, _ = await slave_with_range(rig)
    mallory = await rig.framework("mallory")
    holder = await rig.launch(mallory, "exec sleep 600", "holder", discrete=ports(base + 4))
    kept = await rig.launch(mallory, escape(base + 4), "daemon", discrete=ports(base + 3))
    squat = await rig.launch(mallory, escape(base + 6), "squat", discrete=ports(base + 2))
    try:
        for task in ("holder", "daemon", "squat"):
            await mallory.update_for(task, TaskState.RUNNING, timeout=15)
        await eventually(lambda: stray_pid(squat) is not None and not alive(stray_pid(squat)))
        await eventually(lambda: answers(base + 4), timeout=15)
        assert alive(stray_pid(kept))  # (still serving after the pass that killed the other)
        ended = [u.status.task_id for u in mallory.inbox.of(Update) if u.status.state.terminal]
        assert ended == []
    finally:
        for sandbox in (holder, kept, squat):
            kill(stray_pid(sandbox))


async def test_another_slaves_task_on_this_host_is_not_a_stray(rig: Rig) -> None:
    """Two slaves on one host, one range (as a local cluster's slaves each offer
    31000-32000): slave s1 leaves alone the listener of s2's task, though it runs as a
    principal's user under no task of s1's (its line goes up to s2's wrapper, not init)."""
    base = free_port(12)
    held = Discrete({PORTS: Ranges([(base, base + 9)])})
    isolation = {
        "ports_isolation": True, "ports_check_interval": 0.2, "switch_user": True,
        "pid_namespace": False,
    }  # fmt: skip
    # (s2 holds the one task: the next offer is s1's)
    await rig.start_slave("s2", Resources(cpus=0.1, mem=64), discrete=held, **isolation)
    mallory = await rig.framework("mallory")
    server = f"PORT0={base + 5} exec {port_server()}"
    await rig.launch(mallory, server, "on-s2", discrete=ports(base + 5))
    await mallory.update_for("on-s2", TaskState.RUNNING, timeout=15)
    await eventually(lambda: answers(base + 5), timeout=15)
    await rig.start_slave("s1", Resources(cpus=4, mem=2048), discrete=held, **isolation)
    # a squatter on s1 is found by s1's passes, which have looked at s2's task's too
    squat = f"PORT0={base + 6} exec {port_server()}"
    await rig.launch(mallory, squat, "on-s1", discrete=ports(base + 4))
    failed = await mallory.update_for("on-s1", TaskState.FAILED, timeout=15)
    assert failed.reason == Reason.CONTAINER_LIMITATION
    assert answers(base + 5)
    on_s2 = [u.status for u in mallory.inbox.of(Update) if u.status.task_id == "on-s2"]
    assert not any(status.state.terminal for status in on_s2), on_s2
    assert failed.slave_id == "s1"
