"""Review 59: a claimant whose victims take their kill grace (a service's 30 s, under the
slave's 60 s --max-kill-grace) is never counted for the room it leaves unused: the hold
(notice + 10 s + two rounds, 14 s here) lapses before the victims end, and `ClaimUse`
counts a claim whose victims outlived the hold "neither way". The claimant declines the
room with a long filter once it is free (it was held for nobody by then), the victim
takes it back, and the claimant starves again: its tenant never waits, and the victim
loses a task every starvation timeout plus a grace, for a framework that ran nothing."""

from __future__ import annotations

from harness.cycle import end_after_grace, hog_and_claimant, hog_fills

GRACE = 30.0  # the victims' kill policy's grace: a service's, within --max-kill-grace
WINDOW = 600.0  # seconds watched


def test_a_claimant_whose_victims_take_their_grace_never_waits_for_unused_claims() -> None:
    # A (honest) fills both slaves; B declares demand, never launches
    _, books, cycle = hog_and_claimant(2, 2)
    now, claims, killed = 0.0, [], 0
    ending: dict[tuple[str, str], tuple[float, str]] = {}  # victim: when it ends, where
    while now < WINDOW:  # a check and a round a second, as the master's
        plan = cycle.check(now)
        claims += [now for c in plan.claims if c.claimant == "B"]
        killed += end_after_grace(cycle, books, ending, now, GRACE)  # (SIGTERM now)
        for o in cycle.round(now).offers:
            if o.framework_id == "B":  # declined, not to be offered that slave for long
                cycle.decline("B", o.slave_id, o.resources, 3600.0, now, whole=True)
                continue
            hog_fills(cycle, books, o, now)  # A launches again
        now += 1.0
    # a tenant that leaves claims unused waits 60 s, 120 s, 240 s...: after its victims
    # end, at most 4 claims fit in 600 s
    assert len(claims) <= 4, (
        f"{len(claims)} claims for B in {WINDOW:g}s at {claims} ({killed} of A's tasks "
        f"killed): B never launched a task and declined every room freed for it"
    )
