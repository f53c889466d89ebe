"""Review 70: a guarantee claim takes a multi-role tenant's tasks in ITS guaranteed role,
leaving that role below its own guarantee, where the tenant's unguaranteed role had as
many tasks to give.

`guarantee_rule` (09a900c) lets a task go to a role short of its guarantee "so long as
each guarantee on its own role's path stays met without the task". It reads the victim's
role as `Contender.role` -- a multi-role framework's first role alone -- and its holdings
as the framework's whole books (`books.held`); a task carries no role at all
(`RunningTask`). Tenant T runs hydra in `t-batch` and `t-web`, `t-web` guaranteed 4 CPUs
and running 4 tasks (its guarantee, met), `t-batch` 4 more (older). Role `prod`,
guaranteed 4 and holding nothing, wants 4: the 4 `t-batch` tasks meet it and leave every
guarantee met. The youngest go first, and the rule sees either no guarantee on hydra's
path (first role `t-batch`) or `t-web`'s met by all 8 of hydra's tasks (first role
`t-web`): `t-web`'s own 4 tasks are doomed, and T's guaranteed role falls to nothing.
"""

from __future__ import annotations

import pytest

from master.allocation.allocator import Allocator
from master.allocation.planning import RunningTask
from master.allocation.preemption import PreemptionConfig
from master.allocation.quota import Quota
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books, doomed

TASK = Resources(cpus=1, mem=1024)
SLAVE = Resources(cpus=4, mem=4096)


@pytest.mark.parametrize("roles", [["t-batch", "t-web"], ["t-web", "t-batch"]])
@pytest.mark.parametrize("policy", ["hdrf", "drf"])
def test_a_guarantee_claim_leaves_a_multi_role_victims_guarantee_met(
    policy: str, roles: list[str]
) -> None:
    config = CycleConfig(
        policy=policy, preemption=PreemptionConfig(guarantee_timeout=1.0, notice=1.0)
    )
    a, books = Allocator(policy, quota_headroom="demand"), Books()
    a.roles.set_quota("prod", Quota(guarantee=Resources(cpus=4)))
    a.roles.set_quota("t-web", Quota(guarantee=Resources(cpus=4)))
    a.add_framework("hydra", roles=roles)
    a.add_framework("pfw", "prod")
    books.roles.update({"hydra": roles[0], "pfw": "prod"})  # (as the master's: its first)
    for i in range(2):
        a.add_slave(f"s{i}", SLAVE)
    cycle = OfferCycle(a, books, config)
    for i in range(8):  # on each slave 2 older tasks in t-batch, 2 younger in t-web
        slave, role = f"s{i % 2}", "t-batch" if i < 4 else "t-web"
        tid = f"{role}-{i}"
        a.allocate_existing("hydra", slave, TASK, role)
        # (its role, as the master's books give a multi-role framework's task)
        books.tasks[("hydra", tid)] = RunningTask("hydra", tid, slave, dict(TASK.millis), i, role)
    assert a.allocation("hydra", "t-web").get("cpus") == 4  # its guarantee, met
    books.demand["pfw"] = [(dict(TASK.millis), 4)]

    # past the guarantee's timeout
    victims = sorted(v.task_id for v in doomed(cycle, (0.0, 1.0, 2.0, 3.0)))
    web = [t for t in victims if t.startswith("t-web")]
    assert not web, (
        f"prod's guarantee claim doomed {victims}: {len(web)} of them t-web's, which is "
        f"guaranteed 4 CPUs and runs 4, while t-batch's 4 tasks would have met prod's "
        f"guarantee with every guarantee kept"
    )
