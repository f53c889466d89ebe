"""A newcomer following the reservations how-to ("`drfmesos reserve` reserves in the
operator's own name ... and that is how `unreserve` names it") on a cluster without
credentials:

    $ drfmesos reserve slave-4e8d1d912d40 'cpus(team-a):2;mem(team-a):1024'
    reserve: cpus(team-a,):2;mem(team-a,):1024 on slave slave-4e8d1d912d40

`drfmesos state` then showed `cpus(team-a,operator):2`, not what `reserve` said. Giving
`unreserve` what `reserve` printed was refused with words that do not say why
("UNRESERVE: UNRESERVE: slave ... has not cpus(team-a,):2;mem(team-a,):1024 free"), and
the form without a principal with pydantic's ("(message): Value error, UNRESERVE
cpus(team-a): dynamically reserved, no volume"), neither saying to name the reserver.
Each is said as the slave's state names it now."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from click.testing import CliRunner

from cluster.cli import main
from protocol.wire.framework import Error, OfferOperation
from protocol.wire.operator import OperateResources
from protocol.wire.resources import Resources
from protocol.wire.values import Wire
from protocol.wire.views import ClusterEvent

from harness.fakes import FakeFramework
from harness.helpers import eventually
from harness.master import Cluster, T
from harness.master import cluster as cluster

R = Resources.parse
NOWHERE = ["--broker", "mqtt://127.0.0.1:1", "--timeout", "1"]


def test_reserve_says_the_reservation_as_unreserve_names_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorded = R("cpus(team-a,operator):2;mem(team-a,operator):1024")

    def master_answers(
        broker: str, cluster: str, message: Wire, done: Callable[[ClusterEvent], bool], _: float
    ) -> None:  # the master's event for the RESERVE it applied, with what it made
        assert done(ClusterEvent(kind="reserve", slave_id="slave-1", resources=recorded))

    monkeypatch.setattr("cluster.local.reserve_cli._call", master_answers)
    result = CliRunner().invoke(
        main, ["reserve", "slave-1", "cpus(team-a):2;mem(team-a):1024", *NOWHERE]
    )
    assert result.exit_code == 0, result.output
    assert str(recorded) in result.output, result.output


def test_unreserve_without_the_reserver_says_to_name_it() -> None:
    result = CliRunner().invoke(
        main, ["unreserve", "slave-1", "cpus(team-a):2;mem(team-a):1024", *NOWHERE]
    )
    assert result.exit_code == 2, result.output
    assert "(message)" not in result.output, result.output
    assert "Value error" not in result.output, result.output
    assert "principal" in result.output, result.output


async def operate(cluster: Cluster, operation: OfferOperation) -> FakeFramework:
    """The operation on slave s1 by operator `ops`; its inbox (a FakeFramework's)."""
    bus = await cluster.stack.enter_async_context(
        cluster.connect(name="ops", inbox=T.outbox("operator", "ops"), will=None)
    )
    ops = FakeFramework(bus, T, "ops")
    await bus.subscribe(T.outbox("operator", "ops"), ops.inbox)
    await bus.publish(
        T.inbound("operator", "ops"), OperateResources(slave_id="s1", operation=operation)
    )
    return ops


async def test_a_refused_operation_names_the_operation_once(cluster: Cluster) -> None:
    await cluster.slave("s1", R("cpus:4;mem:1024"))
    await eventually(lambda: "s1" in cluster.master.books.slaves)
    unreserve = OfferOperation(type="UNRESERVE", resources=R("cpus(team-a,ops):2"))

    ops = await operate(cluster, unreserve)

    refused = await ops.inbox.wait_for(Error)
    assert "has not cpus(team-a,ops):2 free" in refused.message, refused.message
    assert "UNRESERVE: UNRESERVE" not in refused.message, refused.message
