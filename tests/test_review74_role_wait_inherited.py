"""Review 74: the wait for leaving claims unused is kept per role (2170852), and a newcomer
to a shared role inherits the whole doubled wait another principal ran up there.

`ClaimUse` keys a claimant's count and wait by its principal AND each of its roles, and a
claimant may claim only while none of its keys waits. mallory (her own principal, allowed
in role `m`) declares 4 tasks and turns down every room freed for her, alone in `m` for
1000 s: the role's count doubles to 60, 120, 240, 480, then 960 s. alice, another tenant
with valid credentials in `m`, arrives then, declares 2 tasks (her fair share: half of
`m`'s half of the cluster) and uses every room she is offered; she has never left a claim
unused. The hog holds the whole cluster. alice waits out mallory's doubled wait -- some
15 minutes -- below her fair share; the role's wait doubles up to an hour, and alice's
first use resets only the count, not a wait mallory has already started. The documented
price ("a principal sharing a role with one that leaves its claims unused waits with
it") is a wait; what a tenant relies on is not to inherit
another principal's history: her first claim comes within one first wait of her joining.
"""

from __future__ import annotations

import pytest

from master.allocation.claim_use import FIRST_WAIT

from harness.review74 import Tenant, simulate

JOIN = 1000.0
TIMEOUT, NOTICE = 2.0, 1.0


def tenants(mallory_uses: bool, mallory_roles: tuple[str, ...]) -> list[Tenant]:
    return [
        Tenant("hog", "h", "hog"),
        Tenant("mallory", "m", "mallory", declare=4, uses=mallory_uses, roles=mallory_roles),
        Tenant("alice", "m", "alice", declare=2, joins=JOIN),
    ]


@pytest.mark.parametrize("mallory_roles", [(), ("x", "m")], ids=["one-role", "multi-role"])
def test_a_newcomer_to_a_role_does_not_inherit_another_principals_doubled_wait(
    mallory_roles: tuple[str, ...],
) -> None:
    """(multi-role: mallory's one framework is in `x` and `m`, each of her claims, in
    whichever role, makes both wait; alice's fair share is then 1 task.)"""
    bound = JOIN + TIMEOUT + NOTICE + FIRST_WAIT + 10.0
    want = {"alice": 1 if mallory_roles else 2}
    honest = simulate(tenants(True, mallory_roles), JOIN + 200, want)
    assert honest.reached.get("alice", float("inf")) <= bound  # (the rig: she gets it)
    run = simulate(tenants(False, mallory_roles), JOIN + 1200, want)
    reached = run.reached.get("alice", float("inf"))
    unused = run.cycle.preemption.claim_use.unused("mallory")
    assert reached <= bound, (
        f"alice, who never left a claim unused, joined role m at {JOIN:.0f} s and ran her "
        f"fair share of {want['alice']} task(s) only at {reached} s (bound {bound:.0f} s): "
        f"she waited out the wait mallory ran up in m ({unused} unused claims in a row)"
    )
