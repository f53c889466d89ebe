"""The role tree keeps its keys as its books change, and a round walks it by shortcuts
(a share that only grows kept as a running maximum, heaps whose tops are kept fresh, the
walk straight down the top children). Whatever happens, each shortcut must choose what
the plain computation chooses: keys made anew from the books, and the full walk."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from master.allocation.role_tree import TREE_POLICIES, RoleTree
from master.allocation.sorter import Total
from protocol.wire.resources import Resources

SEGMENTS = st.sampled_from(["a", "b", "c"])
ROLES = st.lists(
    st.lists(SEGMENTS, min_size=1, max_size=3).map("/".join), min_size=1, max_size=8, unique=True
)
GIVEN = st.sampled_from(
    [Resources(cpus=1), Resources(mem=256), Resources(cpus=2, mem=128), Resources(cpus=0.5)]
)
OPS = st.lists(
    st.tuples(
        st.sampled_from(["allocate", "allocate", "allocate", "release", "want", "idle",
                         "weight", "ordering", "grow", "arrive"]),
        st.integers(0, 7),
        GIVEN,
        st.sets(st.integers(0, 7)),  # the roles that accept the question asked after it
    ),
    min_size=1,
    max_size=60,
)  # fmt: skip


class Twins:
    """Two trees driven alike: `kept` as a round drives it; `anew` makes every key anew
    from its books before it is asked (its total's version moves, as when a slave comes)."""

    def __init__(self, policy: str, roles: list[str]) -> None:
        self.totals = (Total(), Total())
        self.kept, self.anew = (RoleTree(policy, t) for t in self.totals)
        for total in self.totals:
            total.add(Resources(cpus=16, mem=4096))
        self.held: dict[str, list[Resources]] = {r: [] for r in roles}
        for role in roles:
            self.do("add_role", role)

    def do(self, verb: str, *args: object) -> None:
        for tree in (self.kept, self.anew):
            getattr(tree, verb)(*args)

    def ask(self, accepting: set[str]) -> None:
        self.totals[1].add(Resources())  # (nothing more: only the version moves)
        anew = self.anew
        wanted = accepting.__contains__
        chosen = self.kept.first(wanted)
        anew.first(wanted)  # (makes its keys anew)
        if anew.policy == "naive-hdrf":
            plain = anew._first(anew.root, wanted)
        else:
            best = anew._best(anew.root, wanted)  # the full walk, no shortcut
            plain = best[1] if best is not None else None
        assert chosen == plain
        for path, node in self.kept.nodes.items():
            other = anew.nodes[path]
            kept = (node.share, node.pool_key, node.key, node.first)
            assert kept == (other.share, other.pool_key, other.key, other.first), path
            earliest = min(n.arrival for p, n in self.kept.nodes.items() if under(p, path))
            assert node.first == earliest, path  # (its subtree's earliest arrival)
        for node in self.kept.nodes.values():  # every heap's top is fresh
            if node.heap:
                _, _, name, version = node.heap[0]
                assert node.children[name].version == version
                assert node.children[name].wanting


def under(path: str, node: str) -> bool:
    """Whether `path` is `node` or below it."""
    return path == node or path.startswith(f"{node}/")


@settings(max_examples=300, deadline=None)
@given(policy=st.sampled_from(TREE_POLICIES), roles=ROLES, ops=OPS)
def test_what_a_round_chooses_is_what_keys_made_anew_choose(
    policy: str, roles: list[str], ops: list[tuple[str, int, Resources, set[int]]]
) -> None:
    twins = Twins(policy, roles)
    for op, k, resources, accepting in ops:
        role = roles[k % len(roles)]
        held = twins.held[role]
        if op == "allocate":
            twins.do("allocated", role, resources)
            held.append(resources)
        elif op == "release" and held:
            twins.do("unallocated", role, held.pop(k % len(held)))
        elif op in ("want", "idle"):
            twins.do("set_wanting", role, op == "want")
        elif op == "weight":
            twins.do("set_weight", role, 1 + k % 3)
        elif op == "ordering":  # of its pool (the root's, for a role at the top)
            twins.do("set_ordering", role.rpartition("/")[0], ("drf", "fair", "fifo")[k % 3])
        elif op == "arrive":  # its earliest framework now (a fifo pool's order; None: none)
            twins.do("set_arrival", role, k if k % 4 else None)
        elif op == "grow":  # a slave comes: every share changes
            for total in twins.totals:
                total.add(Resources(cpus=k, mem=128 * k))
        twins.ask({roles[i % len(roles)] for i in accepting})
