"""Review 69: a multi-role framework's role with a quota guarantee is never preempted for.

Preemption's guarantee check (`Preemption._guarantee_claims`) counts a role's members by
`Contender.role`, which for a multi-role framework is its first role alone
(`cycle.claims.contender`), holding all it holds in every role. A tenant given `h-batch`
and `h-web`, with a guarantee of 6 CPUs on `h-web`, that runs one framework in both:
its guaranteed role holds nothing, wants 6 tasks, and waits for ever -- preemption either
finds no member of `h-web` wanting (the framework is counted in `h-batch`), or (with
`h-web` first) counts its `h-batch` tasks as `h-web`'s and finds the guarantee met. Another
tenant over its own fair share keeps what it holds.
"""

from __future__ import annotations

import pytest

from protocol.wire.resources import Resources

from harness.cycle import hydra_and_xena


@pytest.mark.parametrize("roles", [["h-batch", "h-web"], ["h-web", "h-batch"]])
def test_a_multi_role_frameworks_guaranteed_role_is_preempted_for(roles: list[str]) -> None:
    cycle, _ = hydra_and_xena(roles)
    a = cycle.allocator
    assert a.allocation("hydra", "h-web") == Resources()  # its guaranteed role: nothing
    assert a.allocation("xena").get("cpus") == 6  # over its third of 12 CPUs
    claims = []
    for now in (0.0, 1.0, 2.0, 3.0):  # a check a second, past the guarantee's timeout
        claims += cycle.check(now).claims
    victims = {v.framework_id for c in claims for p in c.plans for v in p.victims}
    assert victims == {"xena"}, (
        f"role h-web, guaranteed 6 CPUs, holds none and its framework wants 6, while xena "
        f"holds 6 CPUs against its fair 4: preemption made {claims}"
    )
