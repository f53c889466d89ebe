"""Review 74: `why` does not tell a tenant that the wait holding it back is its role's.

Since the wait for leaving claims unused is kept per role too (2170852), a claimant waits
while any of its keys waits, but `ClaimUse.waiting` and `unused` (what `OfferCycle.why`
tells) read only the keys of the framework's own last claim: alice, new to role `m`
where mallory (another principal) ran up a doubled wait by turning down every room freed
for her, is held back for minutes below her fair share and `why` says nothing of a wait
-- she cannot tell preemption will not come. And once alice has claimed in `m` (and used
it), `why` tells her she "left the room freed for it unused" as many times as mallory did.
A tenant relies on `why` for what keeps it from its share, and on its being true of it.
"""

from __future__ import annotations

from master.allocation.claim_use import ClaimUse

from harness.review74 import TASK, Tenant, simulate

JOIN = 1000.0


def test_why_tells_a_newcomer_held_back_by_its_roles_wait_that_preemption_waits() -> None:
    tenants = [
        Tenant("hog", "h", "hog"),
        Tenant("mallory", "m", "mallory", declare=4, uses=False),
        Tenant("alice", "m", "alice", declare=2, joins=JOIN),
    ]
    # (asked 10 s after she joins: role m's wait, set at 969 s, holds her until 1,029 s,
    # when she claims -- she no longer waits out mallory's doubled 960 s: review 74 #1)
    run = simulate(tenants, JOIN + 11, {})
    now = JOIN + 10
    use = run.cycle.preemption.claim_use
    assert not use.may_claim("alice", now, "alice", roles=("m",))  # (held back: m waits)
    assert run.running("alice") == 0
    reasons, _ = run.cycle.why("alice", now)
    said = " ".join(r.message for r in reasons)
    assert "preemption frees no room" in said, (
        f"alice, held back below her fair share by role m's wait for unused claims, was "
        f"told: {said!r}"
    )


def test_a_tenant_is_not_told_it_left_unused_the_claims_another_left_in_its_role() -> None:
    use, need = ClaimUse(), {"s1": dict(TASK.millis)}
    use.claimed("alice", 10.0, need, 1, "alice", roles=("m",))
    use.offered("alice", "s1", dict(TASK.millis))
    use.launched("alice", "s1", dict(TASK.millis))
    assert use.may_claim("alice", 10.0, "alice", roles=("m",))  # (used: judged so)
    for i in range(3):  # mallory, in m too, turns her rooms down three times in a row
        now = 100.0 + 10_000.0 * i
        assert use.may_claim("mallory", now, "mallory", roles=("m",))
        use.claimed("mallory", now + 5, {"s2": dict(TASK.millis)}, 1, "mallory", roles=("m",))
        use.offered("mallory", "s2", dict(TASK.millis))
        assert not use.may_claim("mallory", now + 5, "mallory", roles=("m",))
    assert use.unused("alice") == 0, (
        f"alice, who used the one claim she had, is counted {use.unused('alice')} claims "
        f"left unused in a row (mallory's, in role m)"
    )
