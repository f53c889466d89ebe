"""Review 66 (on c3c4717): slaves of one host, each offering its own ports (as the demo
and the ports how-to now have them), leave each other's ranges to any tenant.

Each slave's ports isolator holds its own `ports` range alone ("a port outside it is no
task's to be given, and is left alone"). Where slaves share one host's network and each
offers a range of its own (e0fcac0: 31000-31299, 31300-31599, 31600-31899), a port of
slave 2's range is one slave 2 gives to tasks, but slave 1 does not hold it; and slave 2
does not look at slave 1's task (no group of its, and a line that meets slave 1's
wrapper first is "not this slave's to judge").

The rig (review 63's: a real master and slaves, `--switch-user`, `--no-pid-namespace`,
ports held, a pass every 0.2 s): s1 offers B..B+4, s2 B+5..B+9, on this one host.
Mallory's task on s1 is given B+1 and listens on B+7 (s2's, which s2 will give the next
tenant). After 25 passes of each slave it still runs and B+7 is held: alice's server
given B+7 on s2 fails with EADDRINUSE.

Expected: a slave holds the ports its host's other slaves offer too (the union of the
ranges of the slaves on the host, or an operator's `--ports-held`, Mesos's whole
31000-32000 in the demo), and fails a task that listens on one it was not given."""

from __future__ import annotations

import socket

import pytest

from protocol.tooling.ports import free_port
from protocol.wire.discrete import Discrete, Ranges
from protocol.wire.messages import Reason, TaskState
from protocol.wire.resources import PORTS, Resources

from harness.helpers import eventually
from harness.ports import rig as rig
from harness.slave import Rig

pytestmark = pytest.mark.timeout(60)


def held(port: int) -> bool:
    """Whether something listens on `port` of 127.0.0.1."""
    try:
        socket.create_connection(("127.0.0.1", port), 1).close()
    except OSError:
        return False
    return True


async def test_a_task_listening_on_its_hosts_other_slaves_range_is_failed(rig: Rig) -> None:
    base = free_port(10)
    isolated = {
        "ports_isolation": True,
        "ports_check_interval": 0.2,
        "switch_user": True,
        "pid_namespace": False,
        # each holds its host's ports, as the ports how-to says (--ports-held)
        "ports_held": Ranges([(base, base + 9)]),
    }
    await rig.start_slave(
        "s1", Resources(cpus=2, mem=1024), discrete=Discrete({PORTS: Ranges([(base, base + 4)])}),
        **isolated,
    )  # fmt: skip
    mallory = await rig.framework("mallory")
    # (s2 not started yet: mallory's offer is s1's)
    listen = (
        '/usr/bin/python3 -c "import socket, time; s = socket.socket(); '
        f"s.bind(('127.0.0.1', {base + 7})); s.listen(4); open('up', 'w').write('1'); "
        'time.sleep(600)"'
    )
    sandbox = await rig.launch(
        mallory, listen, "squat", discrete=Discrete({PORTS: Ranges([(base + 1, base + 1)])})
    )
    await mallory.update_for("squat", TaskState.RUNNING, timeout=20)
    await eventually(lambda: (sandbox / "up").exists(), timeout=10)
    await rig.start_slave(
        "s2", Resources(cpus=2, mem=1024),
        discrete=Discrete({PORTS: Ranges([(base + 5, base + 9)])}), **isolated,
    )  # fmt: skip
    assert held(base + 7)
    try:
        status = await mallory.update_for("squat", TaskState.FAILED, timeout=5)
    except (TimeoutError, AssertionError):
        raise AssertionError(
            f"mallory's task on s1 (ports {base}-{base + 4}), given {base + 1}, listens on "
            f"{base + 7}, which s2 on the same host offers ({base + 5}-{base + 9}): after 25 "
            f"passes of each slave it runs on, and {base + 7} is held: {held(base + 7)}"
        ) from None
    assert status.reason == Reason.CONTAINER_LIMITATION
    assert not held(base + 7)
