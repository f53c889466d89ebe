"""Review 70: a multi-role framework that suppresses its first role alone is taken to want
nothing, in every role: its guaranteed second role, which still wants offers, is never
preempted for.

`cycle.claims.contender` reads whether the framework wants offers from its first role's
client (`a.frameworks.get(a.clients.first(fid))`, "the one a claim's hold is offered to"):
`held_for` is false once that client is suppressed, and the contender `wants` nothing.
Review 69's multi-role case (b62e400): hydra in `h-batch` and `h-web`, `h-web` guaranteed
6 CPUs and holding none, declares 6 tasks. Done with its batch work, it suppresses
`h-batch` (SUPPRESS with roles, as Mesos's) and keeps `h-web` open -- and its guarantee is
never preempted for, while xena holds 6 CPUs against its fair 4. With `h-batch` open the
same claim dooms xena's tasks (review 69's test).
"""

from __future__ import annotations

from harness.cycle import hydra_and_xena


def test_a_guaranteed_role_still_wanting_is_preempted_for_when_the_first_is_suppressed() -> None:
    cycle, _ = hydra_and_xena(["h-batch", "h-web"])  # (review 69's)
    a = cycle.allocator
    cycle.suppress("hydra", ["h-batch"])  # done with batch; h-web still wants offers
    assert not a.suppressed("hydra/h-web")

    claims = []
    for now in (0.0, 1.0, 2.0, 3.0):  # a check a second, past the guarantee's timeout
        claims += cycle.check(now).claims
    victims = {v.framework_id for c in claims for p in c.plans for v in p.victims}
    assert victims == {"xena"}, (
        f"h-web, guaranteed 6 CPUs, holds none and still wants offers (only h-batch is "
        f"suppressed), while xena holds 6 against its fair 4: preemption made {claims}"
    )
