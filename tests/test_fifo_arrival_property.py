"""A fifo pool serves its children in one order, the allocator's and preemption's ideal's
alike: a child's place is the earliest arrival of the frameworks in its subtree now
(ties by name), whenever its node was made and whoever made it (review 74).

Random frameworks come to and leave roles under fifo pools (`q`, and `q/a` nested in it),
some roles named by a roles file first; each wants endless tasks. Whatever happened:

- the pools' order (`fifo_pools`) is that plain computation from the frameworks there
  now and the order they came in;
- the allocator serves the children that want offers in that order;
- the ideal, given the contenders in any order, owes the pool's whole part to the first
  child's frameworks that want it, and nothing to any later child.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from master.allocation.allocator import Allocator
from master.allocation.fair_shares import Contender, fair_allocation
from protocol.wire.resources import Resources

ROLES = ["q/a", "q/b", "q/c", "q/a/x", "q/a/y"]
POOLS = ("q", "q/a")
TASK = {"cpus": 1000, "mem": 1024}
TOTAL = {"cpus": 8000, "mem": 8192}
OPS = st.lists(
    st.tuples(
        st.sampled_from(["join", "join", "leave"]), st.sampled_from(ROLES), st.integers(0, 9)
    ),
    min_size=1,
    max_size=30,
)


def plain_order(pool: str, here: dict[str, str], came: list[str], a: Allocator) -> list[str]:
    """A fifo pool's children by their subtrees' earliest framework here now, then name
    (those with none after, by name)."""
    depth = pool.count("/") + 1
    nodes = a.roles.pool_weights()  # (every node of the tree)
    children = sorted(
        {n.rsplit("/", 1)[-1] for n in nodes if n.startswith(f"{pool}/") and n.count("/") == depth}
    )

    def place(child: str) -> tuple[int, str]:
        under = f"{pool}/{child}"
        arrivals = [
            came.index(f)
            for f, role in here.items()
            if role == under or role.startswith(f"{under}/")
        ]
        return (min(arrivals, default=len(came)), child)

    return sorted(children, key=place)


@settings(max_examples=150, deadline=None)
@given(ops=OPS, listed=st.lists(st.sampled_from(ROLES), unique=True), reverse=st.booleans())
def test_a_fifo_pool_serves_its_children_by_their_earliest_framework_here(
    ops: list[tuple[str, str, int]], listed: list[str], reverse: bool
) -> None:
    a = Allocator("hdrf")
    for role in listed:  # (as a roles file names them: their nodes made first, in its order)
        a.roles.set_ordering(role, "fifo" if role in POOLS else "drf")
    for pool in POOLS:
        a.roles.set_ordering(pool, "fifo")
    a.add_slave("s0", Resources.from_millis(TOTAL))
    here: dict[str, str] = {}  # framework: role
    came: list[str] = []  # every framework, in the order it came
    for n, (op, role, k) in enumerate(ops):
        if op == "join":
            name = f"f{n}"
            a.add_framework(name, role)
            here[name] = role
            came.append(name)
        elif here:
            gone = sorted(here)[k % len(here)]
            a.remove_framework(gone)
            del here[gone]

    pools = a.roles.fifo_pools()
    for pool in POOLS:
        assert list(pools.get(pool, ())) == plain_order(pool, here, came, a), (pool, here, came)

    # the allocator serves the children wanting offers (all: every framework does) so
    children = list(dict.fromkeys(r.split("/")[1] for r in a._role_order.sort()))
    wanting = [c for c in pools.get("q", ()) if any(r.split("/")[1] == c for r in here.values())]
    assert children == wanting

    # the ideal, told the allocator's order, owes the pool to its first wanting child
    contenders = [
        Contender(f, here[f], 1.0, {}, True, shape=TASK, tenant=f)
        for f in (reversed(came) if reverse else came)
        if f in here
    ]
    if not contenders:
        return
    fair = fair_allocation("hdrf", TOTAL, contenders, a.roles.pool_weights(), pools)
    first = f"q/{wanting[0]}"
    for f, role in here.items():
        owed = fair[f][0]
        if role == first or role.startswith(f"{first}/"):
            continue
        assert owed == 0.0, (f, role, owed, first, fair)
    assert sum(fair[f][0] for f in here) > 0.99
