"""The role tree: hierarchical roles (`eng/backend/batch`), weights on every node, and the
order in which its roles are served.

Each role is a node; its path's prefixes are its ancestors. A node's allocation is the sum
of what every framework in its subtree holds, kept incrementally (an allocation changes
the nodes on one path, O(depth log children)). A node's *promise* is its weight's
fraction of its siblings' weights, times its parent's promise: the lecture's pool of 30%
with a sub-pool of 20% is promised 6% of the cluster. Three tree policies order it:

- `naive-hdrf`: at each level, the child with the lowest dominant share / weight, down to
  a role (what Mesos's hierarchical roles and YARN's FairScheduler do). The lecture shows
  how it starves a leaf that went idle and came back while a sibling pool keeps others.
- `flat`: the tree flattened: the role with the lowest share / promise, whatever its
  pool. Every leaf gets its promise, but a pool may not (its children's dominant
  resources differ, so their shares do not add up to the pool's).
- `hdrf`: "min satisfaction" (the lecture; H-DRF, Bhattacharya et al., SoCC 2013): a child's
  place is the lowest share / promise of *any* node in its subtree, itself included, so
  a node below its promise is served first wherever it sits -- pools and leaves alike.
  Only roles that take the offer count: one whose demand is met, or that nothing here
  fits, declines, and its low share must not hold its pool ahead of the others (the
  saturated or blocked leaf of H-DRF); `first` finds the accepting role with the lowest
  such key, the stored keys being lower bounds of it.

Ties between siblings are broken as in Mesos's DRF sorter: fewest allocations to the
node's subtree first, then by name (a role's own frameworks compete as the child "."). A
`fifo` pool serves its children by arrival: a child's place is the earliest arrival of the
frameworks in its subtree now (`set_arrival`, the allocator's numbers), its own first --
not when its node was made, which a framework since gone, or a roles file naming the
role, may have done long before (review 74); ties by name. Preemption's ideal is given
that order (`fifo_pools`), so both serve a fifo pool alike.

A round asks `first` once an offer and then changes the books of one path, so both are
kept cheap: each node keeps its dominant share (a running maximum while it only grows),
its own pool key beside its key, and its heap's top fresh; the usual walk goes straight
down the top children to a role that accepts, which is the full walk's choice because a
pool's key is the lower of its top child's and its own. (`tests/test_role_tree_kept.py`
holds each shortcut to the plain computation.)

No I/O; the allocator drives it and asks `first(wanted)` for the role to serve.
"""

from __future__ import annotations

import heapq
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from master.allocation.sorter import Millis, Sorter, Total
from protocol.wire.resources import MEM, Resources, add_millis, dominant_share, sub_millis
from protocol.wire.roles import role_problem

TREE_POLICIES = ("hdrf", "naive-hdrf", "flat")
ORDERINGS = ("drf", "fair", "fifo")
# (key, tie-break, child name, version): the tie-break is the allocation count (a `fifo`
# pool's children: their arrival, `Node.first`)
_Entry = tuple[float, int, str, int]
INF = float("inf")
LATE = sys.maxsize  # the arrival of a node with no framework in its subtree (after all)


def check_role(role: str) -> str:
    """Role names are paths of 1-64 char segments of letters, digits, _ . - (no wildcards);
    `*`, Mesos's default role, is a role of its own at the top."""
    if role != "*" and (problem := role_problem(role)):
        raise ValueError(problem)
    return role


@dataclass(slots=True)
class Node:
    path: str  # "" for the root
    parent: Node | None
    weight: float = 1.0
    allocation: Millis = field(default_factory=dict)  # everything its subtree holds
    own: Millis = field(default_factory=dict)  # what frameworks registered in it hold
    children: dict[str, Node] = field(default_factory=dict)  # by last path segment
    heap: list[_Entry] = field(default_factory=list)
    version: int = 0
    is_role: bool = False  # frameworks register here (it may also have sub-roles)
    self_wanting: bool = False  # its own frameworks want offers
    wanting: int = 0  # roles at or below it (itself included) whose frameworks want offers
    key: float = 0.0  # its place among its siblings (policy-dependent)
    share: float = 0.0  # the dominant share of `allocation`, kept as it changes
    pool_key: float = 0.0  # its whole subtree's share over its promise (`_pool_key`), kept
    # beside its key: a walk reads it at every pool it passes
    promise: float = 1.0  # the fraction of the cluster its weights promise its subtree
    own_promise: float = 1.0  # ... and its own frameworks (the child "." of weight 1)
    ordering: str = "drf"  # how its children's shares are measured: drf, fair, fifo
    name: str = ""  # the last segment of its path (its key among its parent's children)
    count: int = 0  # allocations to its subtree (Mesos's tie-break among equal keys)
    own_count: int = 0  # ... to its own frameworks (the child "."'s tie-break)
    arrival: int = LATE  # the earliest arrival of its own frameworks (`set_arrival`)
    first: int = LATE  # ... of its subtree's, its own included: its place in a fifo pool

    def __post_init__(self) -> None:
        self.name = self.path.rsplit("/", 1)[-1]


def _tie(child: Node, parent: Node) -> int:
    """A child's tie-break among its siblings: arrival in a `fifo` pool, else how often
    its subtree was allocated to."""
    return child.first if parent.ordering == "fifo" else child.count


def _ratio(share: float, promise: float) -> float:
    return share / promise if promise > 0 else INF


class RoleTree:
    """The allocator's order of roles (a `RoleOrder`) when roles form a tree."""

    hierarchical = True

    def __init__(self, policy: str = "hdrf", total: Total | None = None) -> None:
        if policy not in TREE_POLICIES:
            raise ValueError(f"unknown tree policy {policy!r}; one of {', '.join(TREE_POLICIES)}")
        self.policy = policy
        self._hdrf, self._naive = policy == "hdrf", policy == "naive-hdrf"
        self._totals = total or Total()
        self._seen_total = self._totals.version
        self.root = Node("", None)
        self.nodes: dict[str, Node] = {"": self.root}
        self._weights: dict[str, float] = {}  # configured, kept for nodes that come later
        self._orderings: dict[str, str] = {}  # ... and orderings (a node goes when empty)
        self._promises_stale = False
        # `first_framework`'s walk for the round under way: (wanted, frameworks_of, the
        # walk a role, what it found by role)
        self._walk: tuple[object, object, Callable[[str], bool], dict[str, str]] | None = None

    # -- shape -----------------------------------------------------------------------------
    def add_role(self, role: str) -> None:
        """Make `role` (and its ancestors) exist; frameworks may register in it."""
        check_role(role)
        node = self._ensure(role)
        if not node.is_role:
            node.is_role = True
            self._promises_stale = True  # a role with sub-roles gains the child "."

    def remove_role(self, role: str) -> None:
        """Forget a role with nothing allocated and no wanting frameworks (and empty
        ancestors that are no roles of their own)."""
        node = self.nodes.get(role)
        if node is None:
            return
        self.set_arrival(role, None)  # (no framework of its own is left)
        node.is_role = False
        while node.parent is not None and not node.is_role and not node.children:
            if any(node.allocation.values()):
                break
            del node.parent.children[node.name]
            del self.nodes[node.path]
            node.version += 1
            node = node.parent
            self._promises_stale = True

    def set_weight(self, role: str, weight: float) -> None:
        if not weight > 0:
            raise ValueError(f"weight must be positive, got {weight}")
        check_role(role)
        self._weights[role] = weight
        node = self.nodes.get(role)
        if node is not None:
            node.weight = weight
            self._promises_stale = True

    def set_ordering(self, role: str, ordering: str) -> None:
        """How a pool orders its children (YARN's per-queue policy): `drf` by dominant
        share, `fair` by memory share alone, `fifo` by arrival (shares do not count)."""
        if ordering not in ORDERINGS:
            raise ValueError(f"ordering {ordering!r}: one of {', '.join(ORDERINGS)}")
        node = self.root if role == "" else self._ensure(check_role(role))
        node.ordering = self._orderings[role] = ordering
        self._promises_stale = True  # every key below it is measured anew

    def fifo_pools(self) -> dict[str, tuple[str, ...]]:
        """Each pool that serves its children by arrival, with its children's names in
        that order (its own frameworks, the child ".", come before them all)."""
        return {
            role: tuple(
                c.name for c in sorted(node.children.values(), key=lambda c: (c.first, c.name))
            )
            for role, node in self.nodes.items()
            if node.ordering == "fifo"
        }

    def set_arrival(self, role: str, arrival: int | None) -> None:
        """The earliest arrival of `role`'s frameworks now (None: it has none): its place,
        and its pools', among a fifo pool's children. The allocator numbers frameworks
        as they come; a role keeps the number of its earliest framework still here."""
        node = self.nodes[role]
        before, node.arrival = node.arrival, LATE if arrival is None else arrival
        after, at = node.arrival, node
        # `first` up the path, where it changes: it only comes earlier (a min), or, where
        # the one that was earliest goes, is found again among the node's own and children
        while at.parent is not None and before != after:
            was = at.first
            if after < was:
                at.first = after
            elif before == was:
                at.first = min((c.first for c in at.children.values()), default=LATE)
                at.first = min(at.first, at.arrival)
            else:
                break
            before, after, at = was, at.first, at.parent
        if at is not node:
            self._rekey_path(node)  # (a fifo pool's entries carry its children's `first`)

    def weight(self, role: str) -> float:
        node = self.nodes.get(role)
        return node.weight if node else self._weights.get(role, 1.0)

    def weights(self) -> dict[str, float]:
        return {path: node.weight for path, node in self.nodes.items() if path}

    def names(self) -> list[str]:
        return [path for path in self.nodes if path]

    def name_problem(self, role: str) -> str | None:
        try:
            check_role(role)
        except ValueError as e:
            return str(e)
        return None

    def _ensure(self, role: str) -> Node:
        node = self.nodes.get(role)
        if node is not None:
            return node
        parent_path, _, name = role.rpartition("/")
        parent = self._ensure(parent_path) if parent_path else self.root
        node = Node(role, parent, self._weights.get(role, 1.0))
        node.ordering = self._orderings.get(role, "drf")
        parent.children[name] = node
        self.nodes[role] = node
        self._promises_stale = True
        return node

    def __contains__(self, role: object) -> bool:
        return isinstance(role, str) and role in self.nodes and self.nodes[role].is_role

    def children(self, role: str) -> list[str]:
        return [c.path for c in self.nodes[role].children.values()]

    # -- books -----------------------------------------------------------------------------
    def allocated(self, role: str, resources: Resources) -> None:
        """One more allocation to `role`: books, counts and dominant shares from the role
        up, then keys (`_rekey_path`). Once an offer: `add_millis` inlined, and a share
        only grows here, so it is the larger of what it was and what the resources
        given make of it (the very floats `dominant_share` compares)."""
        delta = resources.millis
        leaf = self.nodes[role]
        own = leaf.own
        for k, v in delta.items():
            own[k] = own.get(k, 0) + v
        leaf.own_count += 1
        total = self._totals.millis
        node = leaf
        while node.parent is not None:  # (the root's books are never read)
            books, share = node.allocation, node.share
            for k, v in delta.items():
                held = books[k] = books.get(k, 0) + v
                t = total.get(k)
                if t and held / t > share:
                    share = held / t
            node.share = share
            node.count += 1
            node = node.parent
        self._rekey_path(leaf)

    def unallocated(self, role: str, resources: Resources) -> None:
        """Resources back from `role` (ResourceError if a node holds less): books from the
        role up, then keys."""
        delta = resources.millis
        leaf = self.nodes[role]
        sub_millis(leaf.own, delta, f"role {role}")
        node = leaf
        while node.parent is not None:
            sub_millis(node.allocation, delta, f"role {node.path}")
            node.share = dominant_share(node.allocation, self._totals.millis)
            node = node.parent
        self._rekey_path(leaf)

    def recount(self, node: str, resources: Resources, sign: int) -> None:
        """A shared volume a role's books just counted (or uncounted) is counted from
        `node` up for another copy in its subtree (`shared`): taken out of those nodes'
        books again (sign -1) or put back (1), as Mesos's sorter counts it once a node.
        No allocation is counted."""
        delta, total = resources.millis, self._totals.millis
        start = at = self.nodes[node]
        while at.parent is not None:
            if sign > 0:
                add_millis(at.allocation, delta)
            else:
                sub_millis(at.allocation, delta, f"role {at.path}")
            at.share = dominant_share(at.allocation, total)
            at = at.parent
        self._rekey_path(start)

    def allocation(self, role: str) -> Resources:
        return Resources.from_millis(self.nodes[role].allocation)

    def share(self, role: str) -> float:
        """A role's dominant share of the cluster (of everything its subtree holds)."""
        return dominant_share(self.nodes[role].allocation, self._totals.millis)

    def held(self, role: str) -> Millis:
        node = self.nodes.get(role)
        return dict(node.allocation) if node is not None else {}

    def wanting(self, role: str) -> bool:
        node = self.nodes.get(role)
        return node is not None and node.wanting > 0

    def promise(self, role: str) -> float | None:
        """The fraction of the cluster promised to `role`'s whole subtree (None: no such
        node)."""
        if role not in self.nodes:
            return None
        self._fresh()
        return self.nodes[role].promise

    def own_promise(self, role: str) -> float:
        """... and to the frameworks registered in `role` itself (all of it, without
        sub-roles; with them, its share as the child "." of weight 1)."""
        self._fresh()
        return self.nodes[role].own_promise

    # -- who wants offers ------------------------------------------------------------------
    def set_wanting(self, role: str, wanting: bool) -> None:
        """Whether `role`'s own frameworks want offers (only wanting subtrees are walked)."""
        node = self.nodes[role]
        if node.self_wanting == wanting:
            return
        node.self_wanting = wanting
        step = 1 if wanting else -1
        n: Node | None = node
        while n is not None:
            n.wanting += step
            n = n.parent
        self._rekey_path(node)

    # -- the sorter's verbs, so the allocator drives a tree as it drives a flat sorter -------
    def add(self, role: str) -> None:
        self.add_role(role)

    def remove(self, role: str) -> None:
        self.set_wanting(role, False)
        self.remove_role(role)

    def activate(self, role: str) -> None:
        self.set_wanting(role, True)

    def deactivate(self, role: str) -> None:
        self.set_wanting(role, False)

    def sort(self) -> Iterator[str]:
        return iter(self.order())

    def ordering_share(self, role: str) -> float:
        """The role's place as the order sees it: its share over its weight (naive) or over
        its promise."""
        self._fresh()
        return self._leaf_key(self.nodes[role])

    # -- order -----------------------------------------------------------------------------
    def first(self, wanted: Callable[[str], bool]) -> str | None:
        """The role to serve next whose frameworks `wanted` accepts (it is given a role)."""
        if not self._keys_current():
            self._fresh()
        if self._naive:  # a node's place is its own: down the best child
            return self._first(self.root, wanted)
        # The usual case, once an offer: straight down the top children to a plain role
        # that accepts. A pool's key is the lower of its top child's and (hdrf) its own,
        # so that role's key is every pool's on the way, and `_best` would take it too.
        node = self.root
        while not node.self_wanting and node.heap:
            node = node.children[node.heap[0][2]]  # (the top is kept fresh)
            if not node.children:
                if wanted(node.path):
                    return node.path
                break
        best = self._best(self.root, wanted)
        return best[1] if best is not None else None

    def first_framework(
        self, frameworks_of: Mapping[str, Sorter], wanted: Callable[[str], bool]
    ) -> str | None:
        """The framework to serve next, in the role `first` chooses among those having one
        `wanted` accepts (a tree may ask several roles before it chooses). A round asks
        this once a slave with the same two arguments: the walk a role is made once."""
        walk = self._walk
        if walk is None or walk[0] is not wanted or walk[1] is not frameworks_of:
            found: dict[str, str] = {}  # by role (a role asked now overwrites its entry)

            def in_role(role: str) -> bool:
                for _, _, framework_id in frameworks_of[role].ordered():
                    if wanted(framework_id):
                        found[role] = framework_id
                        return True
                return False

            walk = self._walk = (wanted, frameworks_of, in_role, found)
        chosen = self.first(walk[2])
        return walk[3][chosen] if chosen is not None else None

    def walk_order(self, frameworks_of: Mapping[str, Sorter]) -> Iterator[str]:
        """Every active framework in the order they would be served: role by role, each
        role's in its own order (a tree's order moves as it serves: what `why` reads)."""
        for role in self.sort():
            yield from frameworks_of[role].sort()

    def _best(self, node: Node, wanted: Callable[[str], bool]) -> tuple[float, str] | None:
        """The role below `node` that `wanted` accepts with the lowest key among those
        that accept, and that key. A node's key is the lowest of its subtree's; a role
        that declines (its demand is met, or nothing here fits it) must not lend its low
        key to its pool, so keys are counted only for roles that accept. A node's stored
        key is a lower bound of that: the walk stops at the first one no lower than the
        best found (usually the second child it looks at)."""
        top: tuple[Node, tuple[float, str] | None] | None = None
        if not node.self_wanting:  # the usual case: the top child's best meets its bound
            if not node.heap:
                return None
            child = node.children[node.heap[0][2]]  # (the top is kept fresh)
            if child.children:
                found = self._best_in(child, wanted)
            else:  # (`_best_in` inlined: a plain role)
                found = (child.key, child.path) if wanted(child.path) else None
            if found is not None and found[0] <= child.key:
                return found  # (no sibling's key is lower than the top child's)
            top = (child, found)
        best: tuple[float, str] | None = None
        for child in self._ordered(node):
            if child is node:  # its own frameworks, as the child "."
                bound = self._leaf_key(node)
                if best is not None and bound >= best[0]:
                    break
                if wanted(node.path):
                    best = (bound, node.path)
                continue
            if best is not None and child.key >= best[0]:
                break
            found = top[1] if top is not None and top[0] is child else self._best_in(child, wanted)
            if found is not None and (best is None or found[0] < best[0]):
                best = found
        return best

    def _best_in(self, child: Node, wanted: Callable[[str], bool]) -> tuple[float, str] | None:
        """`_best` of a child, its own key counted (a plain role's is its own share's; a
        fifo pool's stands for whichever of its children it serves)."""
        if not child.children:
            return (child.key, child.path) if wanted(child.path) else None
        found = self._best(child, wanted)
        if found is not None and child.ordering == "fifo":
            found = (child.key, found[1])
        elif found is not None and self.policy == "hdrf":  # the pool's own counts too
            found = (min(found[0], child.pool_key), found[1])
        return found

    def _first(self, node: Node, wanted: Callable[[str], bool]) -> str | None:
        if not node.self_wanting:  # the usual case: straight down the best child
            top = self._top_child(node)
            if top is None:
                return None
            found = self._first(top, wanted)
            if found is not None:
                return found
        # the best did not want it (or the node's own frameworks compete): walk in order
        for child in self._ordered(node):
            if child is node:
                if wanted(node.path):
                    return node.path
                continue
            found = self._first(child, wanted)
            if found is not None:
                return found
        return None

    def _top_child(self, node: Node) -> Node | None:
        """The wanting child on top of the node's heap (stale entries dropped on the way)."""
        heap = node.heap
        while heap:
            _, _, name, version = heap[0]
            child = node.children.get(name)
            if child is not None and child.version == version and child.wanting:
                return child
            heapq.heappop(heap)
        return None

    def _ordered(self, node: Node) -> Iterator[Node]:
        """The wanting children of `node`, best first -- and `node` itself where its own
        frameworks want offers, placed by its own key among them (the child ".")."""
        heap = node.heap
        passed: list[_Entry] = []
        own: tuple[float, int, str] | None = None
        if node.self_wanting:  # its own frameworks: the child "." (a fifo pool's first)
            own = (self._leaf_key(node), -1 if node.ordering == "fifo" else node.own_count, ".")
        try:
            while heap:
                entry = heap[0]
                child = node.children.get(entry[2])
                if child is None or child.version != entry[3] or not child.wanting:
                    heapq.heappop(heap)
                    continue
                if own is not None and own <= entry[:3]:
                    own = None
                    yield node
                passed.append(heapq.heappop(heap))
                yield child
            if own is not None:
                yield node
        finally:
            for entry in passed:
                heapq.heappush(heap, entry)

    def order(self) -> list[str]:
        """Every wanting role, in the order they would be served (for tests and views)."""
        out: list[str] = []
        while (role := self.first(lambda r: r not in out)) is not None:
            out.append(role)
        return out

    # -- keys ------------------------------------------------------------------------------
    def _share(self, millis: Millis, ordering: str = "drf") -> float:
        if ordering == "fifo":
            return 0.0  # arrival order alone
        if ordering == "fair":
            total = self._totals.millis.get(MEM)
            return millis.get(MEM, 0) / total if total else 0.0
        return dominant_share(millis, self._totals.millis)

    def _pool_key(self, node: Node) -> float:
        """A node's whole subtree: its share (as its parent measures it) over its weight
        (naive) or its promise."""
        ordering = node.parent.ordering if node.parent is not None else "drf"
        share = node.share if ordering == "drf" else self._share(node.allocation, ordering)
        if self.policy == "naive-hdrf":
            return share / node.weight
        return _ratio(share, node.promise)

    def _leaf_key(self, node: Node) -> float:
        """A role's own frameworks, as a leaf (its child "." when it has sub-roles)."""
        ordering = node.ordering if node.children else (node.parent or node).ordering
        share = self._share(node.own, ordering)
        if self.policy == "naive-hdrf":
            return share / (1.0 if node.children else node.weight)
        return _ratio(share, node.own_promise)

    def _key(self, node: Node) -> float:
        """A node's place among its siblings (its `pool_key` made first)."""
        if self.policy == "naive-hdrf":
            return node.pool_key
        if node.children and node.ordering == "fifo":
            # a fifo pool stands among its siblings by its own share: its children's keys
            # (all 0: arrival orders them) say nothing of it (else it came before every
            # sibling, and took the cluster)
            return node.pool_key
        if not node.children:  # a plain role: its own frameworks are its whole subtree
            wanted = node.self_wanting or self.policy == "hdrf"
            return node.pool_key if wanted else INF
        best = self._min_child_key(node)
        if node.self_wanting:
            best = min(best, self._leaf_key(node))
        if self.policy == "hdrf":
            best = min(best, node.pool_key)  # the pool's own promise counts too
        return best

    def _min_child_key(self, node: Node) -> float:
        """The lowest key among the wanting children: the top of the node's heap (kept
        fresh: not a walk over the children)."""
        return node.heap[0][0] if node.heap else INF

    def _keys_current(self) -> bool:
        """Whether keys are kept as things change (else all are made anew before the next
        walk: the total, the shape or the weights changed)."""
        return self._seen_total == self._totals.version and not self._promises_stale

    def _rekey_path(self, node: Node) -> None:
        """New keys from `node` up (its books changed, or who wants offers below it), in
        one pass: a node's key depends only on its own books and its children's keys,
        which are new by the time it is reached. Each node's place in its parent's heap
        too: its old entry is stale now (by its version), replaced where it is on top --
        the usual case, the child a walk just served -- else dropped when it comes to the
        top, which is kept fresh (so a walk, and the parent's own key, read the top as it
        is). Once an offer on every node of a path: `_pool_key`, `_key`, `_tie` and
        `_top_child` inlined for the usual cases."""
        if not self._keys_current():
            return  # everything is rekeyed before the next walk
        hdrf, naive = self._hdrf, self._naive
        parent = node.parent
        while parent is not None:
            if parent.ordering == "drf" and not naive:  # the usual pool key
                promise = node.promise
                pool = node.pool_key = node.share / promise if promise > 0 else INF
            else:
                pool = node.pool_key = self._pool_key(node)
            if not hdrf or node.self_wanting:
                key = node.key = self._key(node)
            elif node.children:  # a pool, its own frameworks not competing
                lowest = node.heap[0][0] if node.heap else INF
                if node.ordering == "fifo":  # (its own share: `_key`)
                    lowest = pool
                key = node.key = lowest if lowest < pool else pool
            else:  # a plain role
                key = node.key = pool
            node.version += 1
            heap, entry = parent.heap, None
            if node.wanting:
                tie = node.first if parent.ordering == "fifo" else node.count
                entry = (key, tie, node.name, node.version)
                if heap and heap[0][2] == node.name:
                    heapq.heapreplace(heap, entry)
                else:
                    heapq.heappush(heap, entry)
            children = parent.children
            while heap and heap[0] is not entry:  # a stale entry that surfaced is dropped
                _, _, name, version = heap[0]
                child = children.get(name)
                if child is not None and child.version == version and child.wanting:
                    break
                heapq.heappop(heap)
            node, parent = parent, parent.parent

    def _fresh(self) -> None:
        if self._keys_current():
            return
        self._seen_total = self._totals.version
        self._promises_stale = False
        self._rebuild(self.root, 1.0)

    def _rebuild(self, node: Node, promise: float) -> None:
        """Recompute promises and keys below `node`, bottom-up (the total changed, or the
        tree's shape or weights)."""
        node.promise = promise
        total_weight = sum(c.weight for c in node.children.values())
        if node.is_role and node.children:
            total_weight += 1.0  # its own frameworks, as the child "." of weight 1
        node.own_promise = promise / total_weight if node.children else promise
        for child in node.children.values():
            self._rebuild(child, promise * child.weight / total_weight)
        node.share = dominant_share(node.allocation, self._totals.millis)
        node.heap = []
        for child in node.children.values():
            child.version += 1
            if child.wanting:
                node.heap.append((child.key, _tie(child, node), child.name, child.version))
        heapq.heapify(node.heap)
        if node.parent is not None:
            node.pool_key = self._pool_key(node)
            node.key = self._key(node)
