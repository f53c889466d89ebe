"""What preemption measures with: each framework as it sees it (`Contender`), and its
fair share, its dominant share in the policy's ideal (`master.allocation.ideal`) for what
everyone holds and still declares it wants, capped by that demand -- the roles as the
allocator's order has them (on a tree, `*` one role and a pool's own frameworks its child
`.`; a multi-role framework a user in each of its roles, its demand one cap they share;
under flat policies a role's weight parted among its frameworks in the question). Pure,
as the rest of `master.allocation`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from master.allocation.ideal import User, exact, ideal
from master.allocation.planning import PART, part_name, pools_of
from master.allocation.role_tree import TREE_POLICIES
from master.allocation.sorter import Millis
from protocol.wire.resources import SCALE

UNITS = 1000  # a framework's demand is split into this many equal parts for the ideal

# which ideal stands for each allocator policy
IDEAL_POLICY = {
    "drf": "wdrf",
    "wdrf": "wdrf",
    "hdrf": "hdrf",
    "naive-hdrf": "naive-hdrf",
    "flat": "flat",
    "asset": "asset",
    "cpu": "cpu",
    "fifo": "fifo",
    "slots": "drf",
    "ceei": "ceei",
}


@dataclass(slots=True)
class Contender:
    """A framework as preemption sees it."""

    framework_id: str
    role: str
    weight: float  # under flat policies: its share of its role's weight
    held: Millis  # offered or in use
    wants: bool  # active and not suppressed
    demand: list[tuple[Millis, int]] | None = None  # declared: (task, count); None: nothing
    shape: Millis | None = None  # what its tasks look like when it declared nothing
    tenant: str = ""  # whose: a wait for leaving claims unused is the tenant's, all its own
    # a multi-role framework's roles, each with what it holds there (empty: one role); the
    # allocator makes it a client in each, and its fairness is each role's
    roles: tuple[tuple[str, Millis, float], ...] = ()  # (and its weight in each)

    def in_roles(self) -> tuple[tuple[str, Millis, float], ...]:
        """Its roles, each with what it holds there and its weight there."""
        return self.roles or ((self.role, self.held, self.weight),)

    def shapes(self) -> list[Millis]:
        """The tasks it would place: declared ones, else the shape of what it runs."""
        if self.demand is not None:
            return [task for task, count in self.demand if count > 0 and task]
        return [self.shape] if self.shape else []

    def wants_more(self) -> bool:
        """Whether it wants offers (connected, not suppressed) and more than it holds:
        what it declared, or else more of what it runs. (A demand declared while
        suppressed is no claim: the room freed for it would go to nobody.)"""
        if not self.wants:
            return False
        if self.demand is not None:
            return any(count > 0 for _, count in self.demand)
        return True


def fair_shares(
    policy: str,
    total: Mapping[str, int],
    contenders: Sequence[Contender],
    pool_weights: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Each contender's dominant share in the policy's ideal, capped by its demand."""
    found = fair_allocation(policy, total, contenders, pool_weights)
    return {f: share for f, (share, _) in found.items() if PART not in f}


def fair_allocation(
    policy: str,
    total: Mapping[str, int],
    contenders: Sequence[Contender],
    pool_weights: Mapping[str, float] | None = None,
    fifo_pools: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, tuple[float, dict[str, float]]]:
    """Each contender's dominant share and resources (user units) in the policy's ideal,
    capped by its demand; and each part of a multi-role one (`part_name`), its role's
    (what planning weighs its tasks in that role by). A multi-role framework's declared
    demand is wanted in each of its roles, wherever it may go, and capped once across
    them (`ideal`'s `caps`: what it holds in all of them and declared), not once a role
    (review 74: it was owed its demand times its roles, and its neighbours less).

    On a tree, `fifo_pools` serve their children by arrival, in the order given with each
    (`RoleOrder.fifo_pools`: the allocator's, so that both serve a fifo pool alike): the
    first come takes what it wants of the pool's part. (A fifo role with no sub-roles here
    orders nothing: its own frameworks share it as any role's do, in the allocator as
    here.)

    Under the flat `fifo`, the contenders' order is the queue: the first takes all it
    wants, then the next, whatever their roles, as the allocator walks them (by arrival
    across roles: `Sorter._queue`). Give them in the order they came, as the master's
    books and the simulator's wishes keep them."""
    out: dict[str, tuple[float, dict[str, float]]] = {c.framework_id: (0.0, {}) for c in contenders}
    if not total:
        return out
    users = []  # the ideal's question: (name, what it wants, weight, path, limit)
    # on a tree, a pool's own frameworks stand together as its child `.` (`planning_path`)
    tree = IDEAL_POLICY.get(policy, "drf") in TREE_IDEALS
    pools = contenders_pools(contenders, pool_weights or {}) if tree else set()
    parts: dict[str, str] = {}  # a multi-role framework's user in each role: whose
    caps = []  # a multi-role framework's declared demand, one for all its parts (`caps`)
    for c in contenders:
        in_roles = c.in_roles()
        declared: dict[str, int] = {}
        for task, count in c.demand or ():
            for name, amount in task.items():
                declared[name] = declared.get(name, 0) + amount * count
        named = []  # its users (a multi-role framework's: a part a role)
        for role, held, weight in in_roles:
            want: dict[str, int] = dict(held)
            limit: int | None = UNITS
            if c.demand is not None:  # (what it declared, wanted in each of its roles ...)
                for name, amount in declared.items():
                    want[name] = want.get(name, 0) + amount
            elif c.wants:
                # wants more of what it runs (or, running nothing, a bit of everything)
                want = dict(c.shape or held or {n: max(1, v // UNITS) for n, v in total.items()})
                limit = None
            want = {n: v for n, v in want.items() if v > 0 and n in total}
            if not want:
                continue
            role = role or "*"  # (`*` a role as any other)
            path = (*role.split("/"), ".") if tree and role in pools else tuple(role.split("/"))
            name = c.framework_id if len(in_roles) == 1 else part_name(c.framework_id, role)
            parts[name] = c.framework_id
            users.append((name, tuple(sorted(want.items())), weight, path, limit))
            named.append(name)
        if c.demand is not None and len(named) > 1:  # (... and once in all of them)
            whole = dict(declared)
            for _, held, _ in in_roles:
                for name, amount in held.items():
                    whole[name] = whole.get(name, 0) + amount
            cap = tuple(sorted((n, v) for n, v in whole.items() if v > 0 and n in total))
            caps.append((c.framework_id, tuple(named), cap))
    if not tree:
        users = role_weights_kept(users, contenders, parts)
    weights = tuple(sorted((tuple(r.split("/")), w) for r, w in (pool_weights or {}).items()))
    fifo = tuple(
        sorted(
            (tuple(r.split("/")) if r else (), tuple(children))
            for r, children in (fifo_pools or {}).items()
            if tree and (not r or r in pools)
        )
    )
    found = _ideal_of(
        IDEAL_POLICY.get(policy, "drf"),
        tuple(sorted(total.items())),
        tuple(users),
        weights,
        fifo,
        tuple(caps),
    )
    summed: dict[str, dict[str, float]] = {}  # (a multi-role framework's roles together)
    for name, (share, resources) in found.items():
        whose = parts.get(name, name)
        out[name] = (share, dict(resources))
        if whose == name:
            continue
        mine = summed.setdefault(whose, {})
        for n, v in resources.items():
            mine[n] = mine.get(n, 0.0) + v
    capacity = {n: v / SCALE for n, v in total.items()}
    for whose, resources in summed.items():
        share = max((v / capacity[n] for n, v in resources.items() if capacity.get(n)), default=0.0)
        out[whose] = (share, resources)
    return out


def contenders_pools(
    contenders: Sequence[Contender], pool_weights: Mapping[str, float]
) -> set[str]:
    """The pools among the contenders' roles (every role of a multi-role one) and those
    weighted: where, on a tree, a pool's own frameworks stand together as its child `.`
    (the ideal's paths and planning's, from one set)."""
    roles = [role for c in contenders for role, _, _ in c.in_roles()]
    return pools_of([*roles, *pool_weights])


# (their roles are nodes of the tree, as the allocator's role tree has them: weights stay)
TREE_IDEALS = tuple(IDEAL_POLICY[p] for p in TREE_POLICIES)


def role_weights_kept(
    users: list[tuple[Any, ...]], contenders: Sequence[Contender], parts: Mapping[str, str]
) -> list[tuple[Any, ...]]:
    """Under a flat policy each framework weighs its part of its role's weight, parted
    among all the role's frameworks; those that want nothing are not in the ideal, and
    their parts go to the role's others, as the allocator's order of roles gives the
    role its whole weight whoever in it wants offers (review 69: a suppressed framework
    halved its role's fair share)."""
    whole: dict[str, float] = {}
    for c in contenders:
        for role, _, weight in c.in_roles():
            whole[role or "*"] = whole.get(role or "*", 0.0) + weight
    asked: dict[str, float] = {}
    role_of = {name: "/".join(p for p in path if p != ".") for name, _, _, path, _ in users}
    for name, _, weight, _, _ in users:
        asked[role_of[name]] = asked.get(role_of[name], 0.0) + weight
    return [
        (name, want, weight * whole.get(role_of[name], weight) / asked[role_of[name]], path, limit)
        for name, want, weight, path, limit in users
    ]


@lru_cache(maxsize=16)
def _ideal_of(
    policy: str,
    total: tuple[tuple[str, int], ...],
    users: tuple[tuple[Any, ...], ...],
    pools: tuple[tuple[tuple[str, ...], float], ...],
    fifo: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (),
    caps: tuple[tuple[str, tuple[str, ...], tuple[tuple[str, int], ...]], ...] = (),
) -> dict[str, tuple[float, dict[str, float]]]:
    """The ideal for these contenders, remembered: it is asked again at every check, and
    between two checks what the contenders want seldom changes (a task that starts
    counts off its framework's declared demand as it adds to what it holds). Asked in
    millis and floats (cheap to compare and hash); contenders that want alike are given
    one task, and equal weights one fraction (made once: 1,000 frameworks are often a
    few task sizes of one weight)."""
    capacity = {n: Fraction(v, SCALE) for n, v in total}
    tasks: dict[tuple[tuple[str, int], ...], dict[str, Fraction]] = {}
    weights: dict[float, Fraction] = {}
    question = []
    for name, want, weight, path, limit in users:
        task = tasks.get(want)
        if task is None:
            task = tasks[want] = {n: Fraction(v, SCALE * UNITS) for n, v in want}
        exact_weight = weights.get(weight)
        if exact_weight is None:
            exact_weight = weights[weight] = exact(weight)
        question.append(User(name, task, weight=exact_weight, path=path, limit=limit))
    shared = {f: (members, {n: Fraction(v, SCALE) for n, v in cap}) for f, members, cap in caps}
    shares = ideal(policy, capacity, question, dict(pools), fifo=dict(fifo), caps=shared)
    return {
        name: (
            float(share.dominant_share),
            {n: float(v) for n, v in share.resources.items() if v},
        )
        for name, share in shares.items()
    }
