"""The tree policies' ideal, exact: progressive filling down a role tree, event to event.

Tasks are infinitely divisible; each user is a leaf of the tree under its pool, promised
the product, down its path, of each node's weight over its siblings' weights. A node's
*satisfaction* is its dominant share (of everything its subtree holds) over its promise.
Resources go, a sliver at a time, where the allocator would send them
(`master.allocation.role_tree`): from the root down to the child with the lowest key, where a
leaf's key is its satisfaction and a pool's is

- `hdrf` (min satisfaction): the lowest satisfaction of the pool itself and of every
  node below it that still wants resources;
- `naive-hdrf`: the pool's own satisfaction (its dominant share over its weight, which
  orders siblings alike).

A `fifo` pool serves its children by arrival: the first that still grows takes all the
pool is given, and the pool's key is its own satisfaction under both policies. The
arrival order is given (the allocator's, `RoleTree.fifo_pools`: each child's earliest
framework still there); children it does not name come after, in the leaves' order.

A leaf stops when it has the tasks it wants (saturated) or a resource it needs runs out
(blocked); from then on its key no longer counts, so it holds no pool back (H-DRF,
Bhattacharya et al., SoCC 2013), though what it holds still counts in its pools' shares.

Between two events every leaf grows at a constant rate, so the filling jumps from one to
the next in exact fractions. The events: a leaf reaches its cap, a resource runs out, a
child's key reaches the lowest among its siblings (it joins them), a pool's own
satisfaction meets its children's, and another resource becomes a pool's dominant one.
The filling is parametrised by the sum of the leaves' dominant shares, so a pool that must
catch up (its key does not rise as it is served) takes a finite stretch, not a jump.

`hdrf`'s ideal is not where one filling stops but where the allocator settles as tasks end
and are replaced (review 77, finding 5; `_settle`): the allocator gives each freed sliver
to the lowest key, and a pool's key counts its own satisfaction as it is then. A pool
whose own satisfaction rose after its leaves' contended resource ran out (p's, once z
holds the memory, in the lecture's tree) no longer holds its siblings back there, so the
filling is made again with each pool's own satisfaction no lower than where the last
ended, until it ends where it started. The lecture promises each leaf at least its share
and says nothing of the rest; that fixed point keeps the promise, and is what a run shows.
`naive-hdrf` keeps the one filling: from scratch it is the lecture's worked example.

Before it fills, the tree is folded (`_fold`): a pool of one leaf is that leaf, and sibling
leaves alike are one, whose share is split between them after; the fractions come out
the same (`tests/test_hdrf_property.py` holds the folded filling to the whole tree's).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import pairwise

ZERO = Fraction(0)
ONE = Fraction(1)
SETTLE_ROUNDS = 8  # `hdrf`: fillings at most to find where the allocator settles
# fifo pools, by path: each with its children's names in arrival order, or (a collection of
# paths) in the leaves' order
Fifo = Mapping[tuple[str, ...], Sequence[str]] | Collection[tuple[str, ...]]


@dataclass(eq=False, slots=True)
class _Node:
    weight: Fraction
    children: list[_Node] = field(default_factory=list)
    promise: Fraction = ONE
    root: bool = False  # the root has no share of its own to be measured by
    fifo: bool = False  # a pool that serves its children by arrival (the first first)
    leaf: str | None = None  # the user's name, for a leaf (a folded one: its first's)
    parts: list[_Node] = field(default_factory=list)  # the leaves folded into it (`_fold`)
    # a leaf's dominant share, its use of each resource per unit of it, its cap (None:
    # endless), and whether it still grows
    share: Fraction = ZERO
    use: dict[str, Fraction] = field(default_factory=dict)
    cap: Fraction | None = None
    active: bool = False
    # measured anew at every event
    growing: bool = False  # something at or below it still grows
    usage: dict[str, Fraction] = field(default_factory=dict)  # a pool's whole subtree's
    key: Fraction = ZERO  # its place among its siblings
    rise: Fraction = ZERO  # how fast its key rises per unit poured into it (a leaf: 1/promise)
    slowness: Fraction = ZERO  # 1 / rise, where rise > 0
    growth: dict[str, Fraction] = field(default_factory=dict)  # resources per unit poured
    lowest: Fraction = ZERO  # a pool's: the lowest key among its growing children ...
    inner_rise: Fraction = ZERO  # ... and how fast that rises per unit poured into it
    sat: Fraction = ZERO  # a pool's own satisfaction ...
    sat_rise: Fraction = ZERO  # ... and how fast that rises per unit poured into it
    top: Fraction = ZERO  # its subtree's dominant usage, as it is (below its floor too) ...
    fastest: Fraction = ZERO  # ... and how fast that rises per unit poured into it
    floor: Fraction = ZERO  # `hdrf`: its own satisfaction where the allocator settles
    bound: bool = False  # its own satisfaction was its key, or tied with it, in a filling
    served: list[tuple[_Node, Fraction]] = field(default_factory=list)  # (child, part)
    inflow: Fraction = ZERO  # of each unit of the filling, how much reaches it


@dataclass(frozen=True, slots=True)
class Leaf:
    """A user as the tree filling sees it: its pool path, weight, and per unit of its
    dominant share, the fraction of each resource's capacity it uses."""

    name: str
    path: tuple[str, ...]
    weight: Fraction
    use: Mapping[str, Fraction]  # per unit of dominant share (max over real resources: 1)
    cap: Fraction | None  # at most this dominant share (None: endless)


def tree_filling(
    policy: str,
    real: Sequence[str],
    leaves: Sequence[Leaf],
    pool_weights: Mapping[tuple[str, ...], Fraction],
    *,
    fold: bool = True,
    fifo: Fifo = (),
) -> dict[str, Fraction]:
    """Each leaf's dominant share in the policy's ideal (`hdrf` or `naive-hdrf`). Every
    resource's capacity is 1 (the leaves' `use` are fractions of it); shares are of the
    `real` resources (others, such as quota limits, only stop who uses them). `fold`:
    fill the tree with its leaves folded (`_fold`: the same shares, fewer nodes). `fifo`:
    pools that serve their children by arrival, as the allocator's role tree: a pool's own
    users (its child `.`) first, then its children in the order given (by name; a pool
    given as a path alone, or a child not named: the leaves' order); the first that still
    grows takes all the pool is given, and the pool stands among its siblings by its own
    satisfaction."""
    min_satisfaction = policy == "hdrf"
    root = _build(leaves, pool_weights, fifo)
    if fold:
        _fold(root, real, {})
    _promise(root, ONE)
    nodes = _walk(root)
    leaf_nodes = [n for n in nodes if n.leaf is not None]
    pools = [n for n in nodes if n.leaf is None]
    for n in leaf_nodes:
        n.rise, n.slowness, n.growth = 1 / n.promise, n.promise, n.use
    early = _fill(root, real, leaf_nodes, pools, min_satisfaction)
    if min_satisfaction and early and any(n.bound for n in pools):
        _settle(root, real, leaf_nodes, [n for n in pools if not n.root], pools)
    shares: dict[str, Fraction] = {}
    for n in leaf_nodes:
        _split(n, n.share, shares)
    return shares


def _fill(
    root: _Node,
    real: Sequence[str],
    leaf_nodes: Sequence[_Node],
    pools: Sequence[_Node],
    min_satisfaction: bool,
) -> bool:
    """One progressive filling from nothing, event to event (each pool's own satisfaction
    no lower than its `floor`). Returns whether a leaf stopped for a resource run out while
    others went on: else every leaf the resources stopped was still served when they
    ran out, its key as low as any, and the filling is where the allocator settles too
    (an end freed goes back where it came from)."""
    early = False
    for n in leaf_nodes:
        n.share = ZERO
        n.active = n.cap is None or n.cap > 0
    for n in pools:
        n.usage = {}
        n.bound = False
    growing = [n for n in leaf_nodes if n.active]
    while growing:
        _measure(root, real, min_satisfaction)
        _pour(root, ONE)
        step = _next_event(pools, growing, root, real)
        for n in pools:  # (the root's usage is every resource's: used up at 1)
            if n.inflow:
                usage, poured = n.usage, n.inflow * step
                for r, g in n.growth.items():
                    usage[r] = usage.get(r, ZERO) + g * poured
        for n in growing:
            if n.inflow:
                n.share += n.inflow * step
        used = root.usage
        blocked = False
        for n in growing:
            if n.cap is not None and n.share >= n.cap:
                n.active = False
            elif any(used.get(r, ZERO) >= 1 for r in n.use):
                n.active, blocked = False, True
        growing = [n for n in growing if n.active]
        early = early or (blocked and bool(growing))
    return early


def _settle(
    root: _Node,
    real: Sequence[str],
    leaf_nodes: Sequence[_Node],
    inner: Sequence[_Node],
    pools: Sequence[_Node],
) -> None:
    """`hdrf`'s ideal is where the allocator settles as tasks end and are replaced: each
    freed sliver goes to the lowest key, and a pool's key counts its own satisfaction as
    it is *then* -- where the filling ended, not where it was when the sliver was first
    given out. So the filling is made again with each pool's own satisfaction no lower
    than where the last one left it (its `floor`), until it ends where it started (review
    77, finding 5): there freeing any sliver and giving it to the lowest key gives it
    back. A filling depends on the floors piecewise linearly, and the floors may close in
    on their fixed point a fraction of the way a round (a pool whose own satisfaction is
    set by a resource a sibling leaf also needs): the fixed point is then extrapolated
    from the last rounds (`_extrapolate`) and checked by one more filling.

    Where the fillings go round instead (pools whose own satisfactions are each set by a
    resource the other's leaves take, in turn), or no fixed point is found in
    `SETTLE_ROUNDS` rounds, the first filling stands."""
    first = [n.share for n in leaf_nodes]
    floors = [_satisfaction(n, real) for n in inner]
    seen = [[n.floor for n in inner], floors]
    for _ in range(SETTLE_ROUNDS):
        for n, floor in zip(inner, floors, strict=True):
            n.floor = floor
        _fill(root, real, leaf_nodes, pools, True)
        made = [_satisfaction(n, real) for n in inner]
        if made == floors:
            return
        if made in seen:  # round and round
            break
        seen.append(made)
        guess = _extrapolate(seen) if len(seen) > 3 else None  # (from three rounds on)
        if guess is not None and guess not in seen and all(g >= 0 for g in guess):
            for n, floor in zip(inner, guess, strict=True):
                n.floor = floor
            _fill(root, real, leaf_nodes, pools, True)
            if [_satisfaction(n, real) for n in inner] == guess:
                return
        floors = made
    for n, share in zip(leaf_nodes, first, strict=True):
        n.share = share


def _extrapolate(seen: Sequence[Sequence[Fraction]]) -> list[Fraction] | None:
    """The fixed point of f -> g(f), g linear, from its last iterates `seen` (each the
    last's g): c with sum(c) = 1 and sum(c_j d_j) = 0 over the differences d_j between
    successive iterates, then sum(c_j f_j) (minimal polynomial extrapolation; exact for
    a linear g once the iterates span its moving part). None where no such c is found."""
    for m in range(1, min(len(seen) - 2, 2) + 1):  # m + 1 coefficients, m + 2 iterates
        last = seen[-(m + 2) :]
        diffs = [[b - a for a, b in zip(x, y, strict=True)] for x, y in pairwise(last)]
        moving = [i for i in range(len(diffs[0])) if any(d[i] for d in diffs)]
        rows = [[d[i] for d in diffs] + [ZERO] for i in moving] + [[ONE] * (m + 1) + [ONE]]
        c = _solve(rows, m + 1)
        if c is not None:
            return [sum((cj * f[i] for cj, f in zip(c, last, strict=False)), ZERO)
                    for i in range(len(last[0]))]  # fmt: skip
    return None


def _solve(rows: list[list[Fraction]], unknowns: int) -> list[Fraction] | None:
    """The one solution of the linear equations `rows` (each its coefficients, then its
    right-hand side), or None (none, or many)."""
    rows = [list(r) for r in rows]
    at = 0
    for col in range(unknowns):
        pivot = next((r for r in range(at, len(rows)) if rows[r][col]), None)
        if pivot is None:
            return None
        rows[at], rows[pivot] = rows[pivot], rows[at]
        lead = rows[at][col]
        rows[at] = [v / lead for v in rows[at]]
        for r in range(len(rows)):
            if r != at and rows[r][col]:
                factor = rows[r][col]
                rows[r] = [v - factor * w for v, w in zip(rows[r], rows[at], strict=True)]
        at += 1
    if any(row[unknowns] for row in rows[at:]):
        return None  # inconsistent
    return [rows[i][unknowns] for i in range(unknowns)]


def _satisfaction(node: _Node, real: Sequence[str]) -> Fraction:
    """A pool's own satisfaction as its filling left it."""
    return max((node.usage.get(r, ZERO) for r in real), default=ZERO) / node.promise


def _build(
    leaves: Sequence[Leaf],
    pool_weights: Mapping[tuple[str, ...], Fraction],
    fifo: Fifo = (),
) -> _Node:
    root = _Node(ONE, root=True, fifo=() in fifo)
    pools: dict[tuple[str, ...], _Node] = {(): root}
    names: dict[int, str] = {}  # a pool's last path segment, by node (to order a fifo's)
    uses: dict[int, dict[str, Fraction]] = {}  # by the `use` given (alive throughout)
    for leaf in leaves:
        parent = root
        for depth in range(1, len(leaf.path) + 1):
            path = leaf.path[:depth]
            node = pools.get(path)
            if node is None:
                node = pools[path] = _Node(pool_weights.get(path, ONE), fifo=path in fifo)
                names[id(node)] = path[-1]
                parent.children.append(node)
            parent = node
        use = uses.get(id(leaf.use))
        if use is None:  # (leaves given one `use` share one: `_fold` finds them alike)
            use = uses[id(leaf.use)] = {r: v for r, v in leaf.use.items() if v}
        parent.children.append(_Node(leaf.weight, leaf=leaf.name, use=use, cap=leaf.cap))
    for path, pool in pools.items():
        if pool.fifo:  # its own (`.`) first, then its children in the order given
            given = fifo.get(path, ()) if isinstance(fifo, Mapping) else ()
            place = {name: i for i, name in enumerate(given)}
            place["."], last = -1, len(given)
            pool.children.sort(key=lambda c: place.get(names.get(id(c), ""), last))
    return root


def _fold(node: _Node, real: Sequence[str], whole: dict[int, bool]) -> None:
    """Fewer nodes, the same filling, bottom-up (before promises are made):

    - a pool whose one child is a leaf is that leaf, of the pool's weight: the leaf's
      promise is the pool's, and so are its share, usage and key at every moment (its
      use of its dominant resource being 1, as `Leaf` has it);
    - sibling leaves given the same `use`, whose caps are alike per unit of weight (or
      none), are one leaf of their summed weight and cap: they start level, grow in
      proportion to their promises and stop together, so each has its weight's part of
      the one's share (`_split`). A role of many frameworks of a few task sizes, or many
      roles of one framework each (the allocator benchmark's tree), is a few leaves.

    `whole`: by `use`, whether it uses 1 of its dominant resource (asked once a use)."""
    for child in node.children:
        if child.leaf is None:
            _fold(child, real, whole)
    if node.fifo:  # (its children's order counts: none is folded into another)
        return
    alike: dict[tuple[int, Fraction | None], int] = {}  # where the first of a kind stands
    made: set[int] = set()  # ... where that is a leaf folded here (not one from below)
    children: list[_Node] = []
    for child in node.children:
        only = child.children[0] if len(child.children) == 1 else None
        if only is not None and only.leaf is not None:
            one = whole.get(id(only.use))
            if one is None:
                one = whole[id(only.use)] = (
                    max((only.use.get(r, ZERO) for r in real), default=ZERO) == ONE
                )
            if one:
                only.weight = child.weight
                child = only
        if child.leaf is None:
            children.append(child)
            continue
        kind = (id(child.use), None if child.cap is None else child.cap / child.weight)
        at = alike.get(kind)
        if at is None:
            alike[kind] = len(children)
            children.append(child)
            continue
        folded = children[at]
        if at not in made:  # the first of its kind meets a second: one leaf for both
            made.add(at)
            folded = children[at] = _Node(
                folded.weight, leaf=folded.leaf, parts=[folded], use=folded.use, cap=folded.cap
            )
        folded.parts.append(child)
        folded.weight += child.weight
        if folded.cap is not None and child.cap is not None:
            folded.cap += child.cap
    node.children = children


def _split(node: _Node, share: Fraction, shares: dict[str, Fraction]) -> None:
    """A leaf's share, to the users it stands for: a folded leaf's to its parts, each by
    its weight (equal weights, the usual case: equal parts)."""
    parts = node.parts
    if not parts:
        assert node.leaf is not None
        shares[node.leaf] = share
        return
    weight = parts[0].weight
    if all(p.weight is weight or p.weight == weight for p in parts):
        each = share / len(parts)
        for p in parts:
            _split(p, each, shares)
        return
    total = sum((p.weight for p in parts), ZERO)
    for p in parts:
        _split(p, share * p.weight / total, shares)


def _promise(node: _Node, promise: Fraction) -> None:
    node.promise = promise
    total = sum((c.weight for c in node.children), ZERO)
    for child in node.children:
        _promise(child, promise * child.weight / total)


def _walk(node: _Node) -> list[_Node]:
    out = [node]
    for child in node.children:
        out.extend(_walk(child))
    return out


def _measure(node: _Node, real: Sequence[str], min_satisfaction: bool) -> bool:
    """Bottom up: each node's usage and key, and -- where something below it still
    grows -- the children it serves and how fast its key and resources rise per unit
    poured into it. Returns whether anything at or below it still grows."""
    node.inflow = ZERO
    node.served = []
    if node.leaf is not None:
        node.growing = node.active
        if node.active:
            node.key = node.share * node.rise
        return node.active
    growing = [c for c in node.children if _measure(c, real, min_satisfaction)]
    node.growing = bool(growing)
    if not growing:
        return False
    node.lowest = lowest = min(c.key for c in growing)
    tied = [c for c in growing if c.key == lowest]
    stuck = [c for c in tied if c.rise == 0]  # keys that do not rise as they are served
    if node.fifo:  # the first come that still grows takes it all
        first = growing[0]
        node.lowest = first.key
        node.served = [(first, ONE)]
        node.inner_rise = first.rise
    elif stuck:  # they take everything until they catch up
        node.served = [(c, Fraction(1, len(stuck))) for c in stuck]
        node.inner_rise = ZERO
    elif len(tied) == 1:
        node.served = [(tied[0], ONE)]
        node.inner_rise = tied[0].rise
    else:  # the tied keys rise together
        inverse = sum((c.slowness for c in tied), ZERO)
        node.served = [(c, c.slowness / inverse) for c in tied]
        node.inner_rise = 1 / inverse
    if len(node.served) == 1:
        node.growth = node.served[0][0].growth
    else:
        growth: dict[str, Fraction] = {}
        for child, part in node.served:
            for r, v in child.growth.items():
                growth[r] = growth.get(r, ZERO) + part * v
        node.growth = growth
    usage = node.usage
    if node.root:
        node.key, node.rise = lowest, node.inner_rise
        node.slowness = 1 / node.rise if node.rise else ZERO
        return True
    node.top = top = max((usage.get(r, ZERO) for r in real), default=ZERO)
    node.fastest = fastest = max(
        (node.growth.get(r, ZERO) for r in real if usage.get(r, ZERO) == top), default=ZERO
    )
    node.sat, node.sat_rise = top / node.promise, fastest / node.promise
    if node.floor > node.sat:  # (`hdrf`: where the allocator settles, it is this already)
        node.sat, node.sat_rise = node.floor, ZERO
    if min_satisfaction and (node.fifo or node.sat <= lowest):
        node.bound = True
    if not min_satisfaction or node.fifo or node.sat < lowest:  # its own satisfaction alone
        node.key, node.rise = node.sat, node.sat_rise
    elif node.sat > lowest:
        node.key, node.rise = lowest, node.inner_rise
    else:
        node.key, node.rise = lowest, min(node.sat_rise, node.inner_rise)
    node.slowness = 1 / node.rise if node.rise else ZERO
    return True


def _pour(node: _Node, amount: Fraction) -> None:
    """Top down: how much of each unit of the filling reaches each node."""
    node.inflow = amount
    for child, part in node.served:
        _pour(child, amount * part)


def _next_event(
    pools: Sequence[_Node], growing: Sequence[_Node], root: _Node, real: Sequence[str]
) -> Fraction:
    """How far the filling goes (in summed dominant share) before the next event."""
    steps: list[Fraction] = []
    for n in growing:
        if n.inflow and n.cap is not None:  # a leaf reaches its cap
            steps.append((n.cap - n.share) / n.inflow)
    for r, rate in root.growth.items():  # a resource runs out
        if rate > 0:
            steps.append((1 - root.usage.get(r, ZERO)) / rate)
    for node in pools:
        if not node.inflow:
            continue
        inner = node.inflow * node.inner_rise
        if inner > 0 and not node.fifo:  # a waiting child's key is reached by the served ones'
            for child in node.children:
                if child.growing and child.key > node.lowest:
                    steps.append((child.key - node.lowest) / inner)
        if node.root:
            continue
        own = node.inflow * node.sat_rise
        if node.fifo:
            pass  # (its own satisfaction is its key, whatever its children's)
        elif node.sat != node.lowest and own != inner:  # its own meets its children's
            meet = (node.lowest - node.sat) / (own - inner)
            if meet > 0:
                steps.append(meet)
        top, fastest = node.top, node.fastest
        if node.floor > top / node.promise and fastest > 0:  # it reaches its floor
            steps.append((node.floor * node.promise - top) / (node.inflow * fastest))
        for r in real:  # another resource overtakes its dominant one
            g = node.growth.get(r, ZERO)
            if g > fastest:
                steps.append((top - node.usage.get(r, ZERO)) / (node.inflow * (g - fastest)))
    positive = [s for s in steps if s > 0]
    if not positive:
        raise ValueError("the filling has no next event: a leaf takes no finite resource")
    return min(positive)
