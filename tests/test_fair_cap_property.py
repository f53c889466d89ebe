"""A fair share is capped by what a framework holds and still declares, once: a
multi-role framework's parts (one in each of its roles) share one cap, its holdings in
all of them and its declared demand, however many roles it is in (review 74: each part
wanted the whole demand, and the framework was owed it once a role).

Random contenders, some multi-role, each holding a little in each role and declaring
tasks (or, declaring nothing, wanting more of what it runs), on a tree or side by side,
under every policy preemption uses: no framework that declared is owed more of any
resource than it holds and declared, and no part of one more than its role's holdings
and the whole demand.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from master.allocation.fair_shares import Contender, fair_allocation
from master.allocation.planning import part_name
from master.allocation.sorter import Millis
from protocol.wire.resources import SCALE

TOTAL = {"cpus": 16000, "mem": 16384}
SHAPES = [{"cpus": 1000, "mem": 1024}, {"cpus": 2000, "mem": 512}, {"cpus": 500, "mem": 2048}]
ROLES = ["a", "b", "a/x", "c"]
EPS = 1e-6


@st.composite
def contender(draw: st.DrawFn, i: int) -> Contender:
    roles = draw(st.lists(st.sampled_from(ROLES), min_size=1, max_size=3, unique=True))
    shape = SHAPES[draw(st.integers(0, len(SHAPES) - 1))]
    held = [{n: v * draw(st.integers(0, 1)) for n, v in shape.items()} for _ in roles]
    declares = draw(st.booleans())
    demand = [(shape, draw(st.integers(0, 6)))] if declares else None
    whole: Millis = {}
    for h in held:
        for n, v in h.items():
            whole[n] = whole.get(n, 0) + v
    in_roles = tuple((r, h, 1.0) for r, h in zip(roles, held, strict=True))
    return Contender(
        f"f{i}",
        roles[0],
        float(len(roles)),
        whole,
        draw(st.booleans()),
        demand=demand,
        shape=None if declares else shape,
        roles=in_roles if len(roles) > 1 else (),
    )


@st.composite
def contenders(draw: st.DrawFn) -> list[Contender]:
    return [draw(contender(i)) for i in range(draw(st.integers(1, 5)))]


@settings(max_examples=200, deadline=None)
@given(
    found=contenders(),
    policy=st.sampled_from(["hdrf", "naive-hdrf", "flat", "drf", "wdrf", "asset", "cpu", "fifo"]),
)
def test_no_framework_is_owed_more_than_it_holds_and_declared_once(
    found: list[Contender], policy: str
) -> None:
    fair = fair_allocation(policy, TOTAL, found, {})
    for c in found:
        if c.demand is None:
            continue
        declared = {n: v * count for task, count in c.demand for n, v in task.items()}
        cap = {n: (c.held.get(n, 0) + declared.get(n, 0)) / SCALE for n in TOTAL}
        owed = fair[c.framework_id][1]
        assert all(owed.get(n, 0.0) <= cap[n] + EPS for n in TOTAL), (c, owed, cap)
        for role, held, _ in c.roles:  # (each part within its own role's and the demand)
            part = fair.get(part_name(c.framework_id, role), (0.0, {}))[1]
            mine = {n: (held.get(n, 0) + declared.get(n, 0)) / SCALE for n in TOTAL}
            assert all(part.get(n, 0.0) <= mine[n] + EPS for n in TOTAL), (c, role, part)
