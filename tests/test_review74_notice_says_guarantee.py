"""Review 74: a preemption notice tells the victim its tasks go for "another tenant's
framework ... below its role's guarantee" when they go for a multi-role framework's fair
share, on a cluster with no guarantee at all.

`MasterPreemptor._claim_told` (ab2eee7) says a guarantee whenever `Claim.role` is set;
`Preemption._plan` (67c2df5) sets it for a multi-role claimant's fair-share claim too (the
role its claim is made in: `in_role`), as it always did for a guarantee's. The victim's
scheduler is told a reason that is false, and one that, where it matters, points it at
quota that does not exist (the notice is all it is told of why its work is thrown away).
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
    ("starving", "framework", "p", "q"),
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


async def test_a_notice_for_a_multi_role_fair_share_says_fair_share(tmp_path: Path) -> None:
    async with rig(tmp_path, PRINCIPALS, [("slave-a", "sa")]) as c:
        assert not c.master.allocator.quotas  # (no guarantee anywhere)
        victim = Told(declare=1_000, floor=4)
        await c.framework("victim", victim, role="v")
        await eventually(lambda: c.running("victim") == 4, timeout=15)
        await c.framework("starving", Filler(declare=1_000, floor=1), roles=["p", "q"])
        await eventually(lambda: bool(victim.notices), timeout=20)
        said = victim.notices[0].message
        assert "guarantee" not in said, (
            f"no role has a guarantee, yet the victim was told: {said!r}"
        )
        assert "fair share" in said, said
