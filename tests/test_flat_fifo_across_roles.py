"""Flat `fifo` serves frameworks by arrival, whatever their roles: the lecture's FIFO (one
queue of jobs, whoever came first first), and the ideal's (`ideal`'s `fifo`: the
frameworks in the order they came, each taking all it wants).

The allocator served one role's frameworks before the next role's (roles by their
earliest framework, then each role's by arrival): with role a's f1, role b's f2, role a's
f3 arriving in that order, f3 went before f2, and kept doing so for as long as any of
a's frameworks stayed subscribed -- a tenant that keeps one framework subscribed put every
later job of its own before everyone else's. The experiments' dashed ideal and
preemption's fair shares read f2 as owed what f3 held.
"""

from __future__ import annotations

import pytest

from cluster.experiments.results import Results
from cluster.experiments.simulator import Simulation, simulate
from cluster.experiments.spec import Spec
from master.allocation.allocator import Allocator
from master.allocation.fair_shares import fair_allocation
from master.allocation.quota import Quota
from protocol.wire.resources import Resources

TASK = {"cpus": 1, "mem": 1024}


def spec(frameworks: list[dict[str, object]]) -> Spec:
    return Spec.model_validate(
        {
            "cluster": {"slaves": [{"count": 3, "resources": {"cpus": 4, "mem": 4096}}]},
            "master": {"policy": "fifo", "allocation_interval": 1, "refuse_seconds": 1},
            "run": {"duration": 300, "seed": 1, "sample_interval": 5},
            "frameworks": frameworks,
        }
    )


def final_running(results: Results, name: str) -> int:
    return [s for s in results.samples if s.framework == name][-1].running_tasks


def test_interleaved_roles_settle_where_the_fifo_ideal_says() -> None:
    """f1 (a), f2 (b), f3 (a), 5 tasks each wanted, 12 CPUs: 5, 5 and 2 by arrival."""
    each = {"task": TASK, "duration": {"uniform": [10, 30]}, "max_running": 5}
    results, _ = simulate(
        spec(
            [
                {"name": "f1", "role": "a", **each},
                {"name": "f2", "role": "b", "start": 1, **each},
                {"name": "f3", "role": "a", "start": 2, **each},
            ]
        )
    )
    ideal = results.ideal[-1].tasks
    assert ideal == {"f1": 5.0, "f2": 5.0, "f3": 2.0}
    got = {f: final_running(results, f) for f in ("f1", "f2", "f3")}
    assert got == {"f1": 5, "f2": 5, "f3": 2}, got
    distance = results.summary()["distance_from_ideal"]
    assert distance["within_one_task"], distance


def test_the_ideal_orders_by_start_not_by_where_the_spec_lists_them() -> None:
    """A framework listed first but started later comes later, in the simulator's queue
    and in the ideal alike."""
    each = {"task": TASK, "duration": {"uniform": [10, 30]}, "max_running": 8}
    results, _ = simulate(
        spec(
            [
                {"name": "late", "role": "a", "start": 5, **each},
                {"name": "early", "role": "b", **each},
            ]
        )
    )
    ideal = results.ideal[-1].tasks
    assert ideal == {"early": 8.0, "late": 4.0}
    assert (final_running(results, "early"), final_running(results, "late")) == (8, 4)


def test_the_walk_is_by_arrival_across_roles() -> None:
    """The allocator's order (what `why` reads) and whom a slave goes to: by arrival."""
    a = Allocator("fifo")
    for fid, role in (("f1", "a"), ("f2", "b"), ("f3", "a"), ("f4", "c"), ("f5", "b")):
        a.add_framework(fid, role)
    assert list(a.order()) == ["f1", "f2", "f3", "f4", "f5"]
    a.remove_framework("f1")
    a.add_framework("f6", "a")
    assert list(a.order()) == ["f2", "f3", "f4", "f5", "f6"]


@pytest.mark.parametrize("quota", [False, True])
def test_a_slave_goes_to_the_first_come_that_wants_it(quota: bool) -> None:
    """f1 (a) wants nothing now: the slave goes to f2 (b), which came before f3 (a) --
    without quotas (`ledger`'s walk) and with them (the quota stage's)."""
    a = Allocator("fifo")
    if quota:  # (any quota makes a round pick through the quota stage)
        a.roles.set_quota("c", Quota(Resources(), limit=Resources(cpus=1)))
    for fid, role in (("f1", "a"), ("f2", "b"), ("f3", "a"), ("f4", "c")):
        a.add_framework(fid, role)
    a.suppress("f1")
    a.add_slave("s0", Resources.from_millis({"cpus": 4000, "mem": 4096}))
    assert [offer.framework_id for offer in a.allocate(0.0)] == ["f2"]


def test_preemptions_fair_shares_read_the_frameworks_as_they_came() -> None:
    """Preemption's ideal is given the frameworks in the order they came (the simulator's
    as the master's books keep them), not as the spec lists them."""
    each = {"task": TASK, "duration": {"uniform": [10, 30]}, "max_running": 8}
    sim = Simulation(
        spec(
            [
                {"name": "late", "role": "a", "start": 5, **each},
                {"name": "early", "role": "b", **each},
            ]
        )
    )
    sim.run()
    contenders = sim.cycle.contenders(300.0)
    assert [c.framework_id for c in contenders] == ["early", "late"]
    total = dict(sim.allocator.offerable_total().millis)
    fair = fair_allocation("fifo", total, contenders, {}, sim.allocator.roles.fifo_pools())
    assert fair["early"][0] == pytest.approx(8 / 12)
    assert fair["late"][0] == pytest.approx(4 / 12)
