"""The ports isolator on a real slave with real task processes (slave.ports_isolator): two
tenants share a slave; one's task that listens on a port of the slave's range it was
not given is killed (TASK_FAILED, REASON_CONTAINER_LIMITATION, the port named), while
the tasks that listen on their own ports, or outside the range, run on."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from protocol.tooling.ports import free_port
from protocol.wire.discrete import Discrete, Ranges
from protocol.wire.messages import Reason, TaskState, Update
from protocol.wire.resources import PORTS, Resources
from slave.bound_sockets import bound_inactive
from slave.config import SlaveConfig
from slave.ports_isolator import listening_sockets, ports_of, squatted

from harness.fakes import FakeFramework
from harness.helpers import eventually
from harness.ports import answers, ports
from harness.slave import Rig, port_server
from harness.slave import rig as rig


async def serve(
    rig: Rig, fw: FakeFramework, task_id: str, given: int, on: int, how: str = ""
) -> None:
    """A task given port `given` that serves HTTP on port `on`, once it answers."""
    command = f"PORT0={on} {how}{port_server()}"
    await rig.launch(fw, command, task_id, discrete=ports(given))
    await fw.update_for(task_id, TaskState.RUNNING)
    await eventually(lambda: answers(on), timeout=15)


MODES = {  # the slave's isolation: none; each tenant a user of its own, in a PID namespace
    "shared-pids": {},
    "confined": {"pid_namespace": True, "switch_user": True},
}


@pytest.mark.parametrize("mode", MODES)
async def test_a_task_listening_on_a_port_it_was_not_given_is_killed(rig: Rig, mode: str) -> None:
    base = free_port(12)
    outside = base + 11  # free, and not in the slave's range
    slave_ports = Discrete({PORTS: Ranges([(base, base + 9)])})
    await rig.start_slave(
        "s1", Resources(cpus=4, mem=2048), discrete=slave_ports,
        ports_isolation=True, ports_check_interval=0.2, **MODES[mode],
    )  # fmt: skip
    mallory = await rig.framework("mallory")
    await serve(rig, mallory, "own", base + 1, base + 1)  # her own port: fine
    await serve(rig, mallory, "outside", base + 2, outside)  # outside the range: not held
    # (the slave's offers: to alice, while mallory waits 2 s; then, alice wanting no
    # more, back to mallory)
    alice = await rig.framework("alice")
    await rig.decline_next(mallory, refuse=2)
    await serve(rig, alice, "web", base, base)
    await rig.decline_next(alice, refuse=3600)
    # a port of the range that is no one's yet (the next tenant's service port): in a PID
    # namespace, a process that left the task's process group is found all the same
    how = "setsid " if mode == "confined" else ""
    command = f"PORT0={base + 5} {how}{port_server()}"
    await rig.launch(mallory, command, "squat", discrete=ports(base + 3))
    failed = await mallory.update_for("squat", TaskState.FAILED, timeout=15)
    assert failed.reason == Reason.CONTAINER_LIMITATION
    assert f"listened on port {base + 5} of the slave's range" in failed.message
    assert f"its ports: {base + 3}" in failed.message
    await eventually(lambda: not answers(base + 5))
    # the pass that found the squatter looked at the others too: they run on
    ended = [
        u.status.task_id
        for fw in (alice, mallory)
        for u in fw.inbox.of(Update)
        if u.status.state.terminal and u.status.task_id != "squat"
    ]
    assert ended == []
    assert answers(base)
    assert answers(base + 1)
    assert answers(outside)


@pytest.mark.parametrize(
    "how",
    ["unshare -Urpf setsid ", "setsid "],
    ids=["nested-user-and-pid-namespace", "setsid-in-the-shared-pid-namespace"],
)
async def test_a_task_that_leaves_its_group_and_namespace_is_held_to_its_ports(
    rig: Rig, how: str
) -> None:
    """Its server in a user and PID namespace of its own, in a session of its own, or
    (without a PID namespace for tasks) a session of its own: still the task's child,
    and the task is killed for the port it was not given."""
    base = free_port(12)
    confined = {"pid_namespace": True, "switch_user": True} if how.startswith("un") else {}
    await rig.start_slave(
        "s1", Resources(cpus=4, mem=2048), discrete=Discrete({PORTS: Ranges([(base, base + 9)])}),
        ports_isolation=True, ports_check_interval=0.2, **confined,
    )  # fmt: skip
    mallory = await rig.framework("mallory")
    command = f"PORT0={base + 5} {how}{port_server()}"
    await rig.launch(mallory, command, "squat", discrete=ports(base + 3))
    failed = await mallory.update_for("squat", TaskState.FAILED, timeout=15)
    assert failed.reason == Reason.CONTAINER_LIMITATION
    assert f"listened on port {base + 5}" in failed.message
    await eventually(lambda: not answers(base + 5))  # (the server too, not just the task)


def test_ports_are_held_by_default_where_tasks_are_isolated(tmp_path: Path) -> None:
    def config(**kw: object) -> SlaveConfig:
        return SlaveConfig("s", "h", Resources(cpus=1), tmp_path, **kw)  # type: ignore[arg-type]

    assert not config().holds_ports
    assert config(switch_user=True).holds_ports
    assert config(pid_namespace=True).holds_ports
    assert not config(pid_namespace=True, ports_isolation=False).holds_ports
    assert config(ports_isolation=True).holds_ports


def test_a_port_reserved_for_a_role_is_held_for_it_too() -> None:
    """`--resources 'ports(svc):[8000-8010];ports:[31000-32000]'`: another tenant's task
    that listens on 8000 squats svc's port; svc's task given 8000 does not."""
    slave = Discrete({"ports(svc)": Ranges([(8000, 8010)]), PORTS: Ranges([(31000, 32000)])})
    assert squatted({8000, 31000}, Ranges(), ports_of(slave)) == [8000, 31000]
    given = ports_of(Discrete({"ports(svc)": Ranges([(8000, 8000)])}))
    assert squatted({8000}, given, ports_of(slave)) == []


def _bound_inactive_listed() -> bool:
    """Whether this kernel lists sockets bound and not listening to sock_diag (6.10+)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return os.fstat(s.fileno()).st_ino in bound_inactive()


needs_bound_inactive = pytest.mark.skipif(
    not _bound_inactive_listed(), reason="the kernel lists no bound-inactive sockets (< 6.10)"
)


@needs_bound_inactive
def test_a_socket_bound_and_never_listened_on_holds_its_port_as_a_listener_does() -> None:
    """In no /proc/net/tcp table, but it holds the port: counted as a listener is, by
    its inode (outside the kernel's ephemeral ports, as a connection's own end is)."""
    base = free_port(2)
    with socket.socket() as bound, socket.socket(socket.AF_INET6) as bound6:
        bound.bind(("127.0.0.1", base))
        bound6.bind(("::1", base + 1))
        held = listening_sockets()
        assert held[os.fstat(bound.fileno()).st_ino] == base
        assert held[os.fstat(bound6.fileno()).st_ino] == base + 1


@needs_bound_inactive
async def test_a_task_that_binds_a_port_it_was_not_given_is_killed(rig: Rig) -> None:
    """A bind alone keeps the next tenant's service from its port: the task is failed
    for it as for a listener, and the port is free again."""
    base = free_port(12)
    await rig.start_slave(
        "s1", Resources(cpus=4, mem=2048), discrete=Discrete({PORTS: Ranges([(base, base + 9)])}),
        ports_isolation=True, ports_check_interval=0.2,
    )  # fmt: skip
    mallory = await rig.framework("mallory")
    program = (
        "import socket, time\n"
        f"s = socket.socket(); s.bind(('127.0.0.1', {base + 5}))\n"
        "time.sleep(600)\n"
    )
    await rig.launch(mallory, f'/usr/bin/python3 -c "{program}"', "squat", discrete=ports(base + 3))
    failed = await mallory.update_for("squat", TaskState.FAILED, timeout=15)
    assert failed.reason == Reason.CONTAINER_LIMITATION
    assert f"port {base + 5} of the slave's range" in failed.message

    def free_again() -> bool:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", base + 5))
            except OSError:
                return False
            return True

    await eventually(free_again)
