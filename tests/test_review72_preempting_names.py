"""Review 72: a preemption notice tells the victim tenant another tenant's framework id and
role.

Everywhere else the master keeps one tenant from learning which frameworks, and whose,
exist: another principal's framework id is answered as one nobody has
(`framework_of_caller`, `Subscriptions._claim_problem`, the Mesos API's "Framework cannot
be found"), and the answer to "why am I offered nothing" counts the frameworks and roles
ahead of a tenant's instead of naming them (`others_named=False`). The notice a victim's
scheduler is sent before its tasks are killed (`Preempting.message`, the Mesos API's
DRFMESOS_PREEMPTING event) says "framework fw-...-... is below its fair share" (or "its
guarantee of role R": `MasterPreemptor._warn`): the claimant's framework id, and for a
guarantee its role, verbatim.

The attacker: a tenant that lets its tasks be preempted (runs a task or two past its
share) learns, each time, which of the other tenants' frameworks is starving, its id
(which names it in every operator's view), and its guaranteed role: what the why answer
is built not to tell it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from frameworks.scheduler import Driver
from protocol.wire.messages import Preempting

from harness.helpers import eventually
from harness.review69 import Filler, rig

PRINCIPALS = [
    ("master", "master"),
    ("slave-a", "slave"),
    ("victim", "framework", "v"),
    ("starving", "framework", "secret-project"),
    ("ops", "operator"),
]
pytestmark = pytest.mark.timeout(60)


class Told(Filler):
    """A Filler that keeps the preemption notices it is sent."""

    def __init__(self, declare: int, floor: int) -> None:
        super().__init__(declare, floor)
        self.notices: list[Preempting] = []

    async def preempting(self, driver: Driver, event: Preempting) -> None:
        self.notices.append(event)


async def test_a_preemption_notice_names_no_other_tenants_framework_or_role(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path, PRINCIPALS, [("slave-a", "sa")]) as c:
        victim = Told(declare=1_000, floor=4)
        await c.framework("victim", victim, role="v")
        await eventually(lambda: c.running("victim") == 4, timeout=15)
        await c.framework("starving", Filler(declare=1_000, floor=2), role="secret-project")
        await eventually(lambda: bool(victim.notices), timeout=20)
        [starving] = [
            fw.framework_id
            for fw in c.master.books.frameworks.values()
            if fw.principal == "starving"
        ]
        said = [n.message for n in victim.notices]
        told = [m for m in said if starving in m or "secret-project" in m]
        assert not told, (
            f"the victim tenant was told the other tenant's framework id {starving}: {told[0]!r}"
        )


async def test_a_preemption_notice_names_the_tenants_own_claimant(tmp_path: Path) -> None:
    """(The fix's) a claimant of the victim's own principal is still named, with its
    reason: the tenant knows its own frameworks, and the notice says which of them the
    tasks go for."""
    async with rig(tmp_path, PRINCIPALS, [("slave-a", "sa")]) as c:
        victim = Told(declare=1_000, floor=4)
        await c.framework("victim", victim, role="v")
        await eventually(lambda: c.running("victim") == 4, timeout=15)
        await c.framework("victim", Filler(declare=1_000, floor=2), role="v")
        await eventually(lambda: bool(victim.notices), timeout=20)
        [claimant] = [
            fw.framework_id
            for fw in c.master.books.frameworks.values()
            if fw.principal == "victim" and fw.framework_id != victim.notices[0].framework_id
        ]
        said = victim.notices[0].message
        assert f"your framework {claimant} is below its fair share" in said, said
