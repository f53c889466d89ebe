"""Review 69: under the default `hdrf` policy, preemption weighs a multi-role framework as
if it were in its first role alone.

The allocator puts a multi-role framework in each of its roles (a client a role), so a
tenant given two roles by the operator is promised two roles' shares. Preemption's ideal
(`preemption.fair_allocation`, fed by `cycle.claims.contender`) sees it as one user at
its first role's path, weight 1, holding everything it holds in all its roles: its second
role vanishes from the tree. A single-role tenant then reads a fair share of 1/2 where
the allocator promises it 1/3, starves below it, and preempts the multi-role tenant's
tasks from its 2/3 down to 1/2.

The cluster: three slaves of 4 CPUs (12), tasks <1 CPU, 64 MB>. `hydra` is allowed roles
`h-web` and `h-batch` and runs one framework in both; `xena` is allowed role `x`. Three
roles of weight 1: hydra's fair share is 8 tasks, xena's 4.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from master.allocation.allocator import Allocator
from master.allocation.fair_shares import fair_allocation
from master.cycle import Wish
from master.cycle.claims import contender
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.review69 import Filler, rig

HYDRA_FAIR, XENA_FAIR = 8, 4  # tasks: two roles' thirds of 12 CPUs, and one role's
PRINCIPALS = [
    ("master", "master"),
    ("slave-a", "slave"),
    ("slave-b", "slave"),
    ("slave-c", "slave"),
    ("hydra", "framework", "h-web", "h-batch"),
    ("xena", "framework", "x"),
    ("ops", "operator"),
]
SLAVES = (("slave-a", "sa"), ("slave-b", "sb"), ("slave-c", "sc"))
pytestmark = pytest.mark.timeout(60)


def test_preemptions_ideal_gives_a_multi_role_framework_its_roles_shares() -> None:
    """The ideal preemption reads, on the allocator's own books: a framework in two roles
    beside one in a third, each role of weight 1, is promised 2/3 of the cluster (as the
    allocator gives it, and as the ideal does under `drf`), not 1/2."""
    for policy in ("hdrf", "drf"):
        a = Allocator(policy)
        for s in ("s0", "s1", "s2"):
            a.add_slave(s, Resources(cpus=4, mem=4096))
        a.add_framework("hydra", roles=["h-web", "h-batch"])
        a.add_framework("xena", "x")
        a.allocate(0.0)  # a slave to each role
        assert a.dominant_share("hydra") == pytest.approx(2 / 3)
        contenders = [contender(a, Wish("hydra", "h-web")), contender(a, Wish("xena", "x"))]
        fair = fair_allocation(policy, dict(a.total.millis), contenders, a.roles.pool_weights())
        assert fair["hydra"][0] == pytest.approx(2 / 3), (policy, fair)
        assert fair["xena"][0] == pytest.approx(1 / 3), (policy, fair)


async def test_a_single_role_tenant_cannot_preempt_a_multi_role_tenant_below_its_share(
    tmp_path: Path,
) -> None:
    """hydra takes the idle cluster in its two roles; xena comes, declaring far more than
    its share. Preemption should take hydra down to its 8 (two roles' thirds) and give xena
    its 4, then stop. Under hdrf xena was given 6 and hydra left with 6."""
    async with rig(tmp_path, PRINCIPALS, SLAVES) as c:
        hydra = Filler(declare=1_000, floor=HYDRA_FAIR)
        await c.framework("hydra", hydra, roles=["h-web", "h-batch"])
        await eventually(lambda: c.running("hydra") == 12, timeout=15)
        xena = Filler(declare=1_000, floor=XENA_FAIR)
        await c.framework("xena", xena, role="x")
        await eventually(lambda: c.running("xena") >= XENA_FAIR, timeout=20)
        start = c.master.offer_rounds.count  # then long past preemption's timeout and notice
        await eventually(lambda: c.master.offer_rounds.count >= start + 40, timeout=20)
        assert c.running("xena") <= XENA_FAIR + 1, (
            f"xena (one role of three) runs {c.running('xena')} of 12 tasks, hydra "
            f"{c.running('hydra')}; fair shares as preemption reads them: "
            f"{c.master.preemptor.preemption.fair}"
        )
        assert hydra.lowest is not None
        assert hydra.lowest >= HYDRA_FAIR, (
            f"hydra (two roles of three) fell to {hydra.lowest} of its {HYDRA_FAIR}"
        )
