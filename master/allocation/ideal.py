"""The ideal: the allocation a policy reaches when tasks are infinitely divisible.

Progressive filling, as in the DRF paper (§4) and the YARN article: every user's share, by
the policy's own measure and weighted, grows at the same rate until a resource it needs
runs out or it has all the tasks it wants; then the others go on. Exact fractions
throughout, so the sources' worked examples check to the letter (9 CPU / 18 GB gives
A 3 tasks and B 2; the lecture's mirrored demands give each 2/3).

    ideal("drf", {"cpus": 9, "mem": 18}, [User("A", {"cpus": 1, "mem": 4}),
                                          User("B", {"cpus": 3, "mem": 1})])

Policies: `drf` (weights ignored), `wdrf`, `asset` (equal sums of shares), `cpu` (equal
CPU shares), `fifo` (in order, each takes all it can), `ceei` (the paper's §5: the
competitive equilibrium from equal incomes, i.e. the allocation that maximises the
weighted product of tasks; solved on its dual and given as exact fractions where the
solution is rational with a small denominator), and `flat` (pools' weights multiplied down
each user's path, then `wdrf`). No I/O: the simulator, the experiments and the master
use it alike.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from master.allocation.tree_ideal import Fifo, Leaf, tree_filling

Vector = dict[str, Fraction]
POLICIES = ("drf", "wdrf", "asset", "cpu", "fifo", "ceei", "flat", "hdrf", "naive-hdrf")


class IdealError(ValueError):
    """A question the ideal cannot answer (an unknown policy, a user with an empty task)."""


@dataclass(frozen=True)
class User:
    """A framework as the ideal sees it: what one task takes, and how much it may get."""

    name: str
    task: Mapping[str, Fraction | float | int]
    weight: Fraction | float | int = 1
    path: tuple[str, ...] = ()  # its pool, root first (a role `eng/batch` -> ("eng", "batch"))
    limit: Fraction | float | int | None = None  # at most this many tasks (None: endless)


@dataclass(frozen=True)
class Share:
    tasks: Fraction
    resources: Vector
    dominant_share: Fraction
    weight: Fraction = Fraction(1)
    extra: dict[str, Fraction] = field(default_factory=dict)


def exact(value: Fraction | float | int | str) -> Fraction:
    """A number as an exact fraction (floats by their shortest decimal form: 0.1 is 1/10)."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, float):
        return Fraction(repr(value))
    return Fraction(value)


def ideal(
    policy: str,
    total: Mapping[str, Fraction | float | int],
    users: Sequence[User],
    pool_weights: Mapping[tuple[str, ...], Fraction | float | int] | None = None,
    quota_limits: Mapping[tuple[str, ...], Mapping[str, Fraction | float | int]] | None = None,
    fifo: Fifo = (),
    caps: Mapping[str, tuple[Collection[str], Mapping[str, Fraction | float | int]]] | None = None,
) -> dict[str, Share]:
    """Each user's tasks, resources and dominant share in `policy`'s ideal allocation.

    `quota_limits` are quota limits of pools (by path): each becomes a resource of its own that
    only the users under that pool consume, so it fills up and stops them like any other.
    `fifo`: pools (by path) that serve their children by arrival: in the order given
    with each (its children's names), else the users' order (tree policies:
    `tree_ideal.tree_filling`).

    `caps`: amounts some users share, by name: the users, and at most how much of each
    resource they hold together (a multi-role framework's parts, one in each of its roles:
    what it holds and still declares, once for them all). As a quota limit, each is a
    resource of its own that only they consume."""
    if policy not in POLICIES:
        raise IdealError(f"unknown policy {policy!r}: one of {', '.join(POLICIES)}")
    capacity = {r: exact(v) for r, v in total.items() if exact(v) > 0}
    # each user's task in exact fractions: users given one task mapping share one (made,
    # and checked, once: many users are often a few task sizes)
    converted: dict[int, Vector] = {}
    tasks = {}
    for u in users:
        task = converted.get(id(u.task))
        if task is None:
            task = converted[id(u.task)] = {r: x for r, v in u.task.items() if (x := exact(v)) != 0}
            if not task or any(v < 0 for v in task.values()):
                raise IdealError(f"{u.name}: a task needs some of at least one resource, none < 0")
        tasks[u.name] = task
    real = dict(capacity)  # shares are of the cluster; limits are only constraints
    for path, limit in (quota_limits or {}).items():
        for r, amount in limit.items():
            virtual = f"limit:{'/'.join(path)}:{r}"
            if exact(amount) > 0:  # a zero limit: a resource nobody has (stops them at 0)
                capacity[virtual] = exact(amount)
            for u in users:
                task = tasks[u.name]
                if u.path[: len(path)] == tuple(path) and r in task:
                    tasks[u.name] = {**task, virtual: task[r]}  # (its own: tasks are shared)
    for cap, (members, limit) in (caps or {}).items():
        inside = set(members)
        for r, amount in limit.items():
            virtual = f"cap:{cap}:{r}"
            if exact(amount) > 0:
                capacity[virtual] = exact(amount)
            for u in users:
                task = tasks[u.name]
                if u.name in inside and r in task:
                    tasks[u.name] = {**task, virtual: task[r]}
    if len({u.name for u in users}) != len(users):
        raise IdealError("user names must be unique")
    weights = {u.name: exact(u.weight) for u in users}
    for u in users:
        if weights[u.name] <= 0:
            raise IdealError(f"{u.name}: weight must be positive")
    if policy == "drf":
        weights = dict.fromkeys(weights, Fraction(1))
    elif policy == "flat":
        weights = flattened_weights(users, pool_weights or {})
    limits = {u.name: None if u.limit is None else exact(u.limit) for u in users}
    # a resource the cluster does not have stops whoever needs it at zero
    for name, task in tasks.items():
        if any(r not in capacity for r in task):
            limits[name] = Fraction(0)

    if policy in ("hdrf", "naive-hdrf"):
        counts = _tree_filling(
            policy, capacity, real, users, tasks, limits, pool_weights or {}, fifo
        )
    elif policy == "fifo":
        counts = _fifo(capacity, [u.name for u in users], tasks, limits)
    elif policy == "ceei":
        counts = _ceei(capacity, tasks, weights, limits)
    else:
        measure = {name: _measure(policy, task, real) for name, task in tasks.items()}
        counts = progressive_filling(capacity, tasks, weights, limits, measure)
    out = {}
    # users alike (one task, one count: a tree's folded leaves) are worked out once
    made: dict[tuple[int, int], tuple[Vector, Fraction]] = {}
    for name, count in counts.items():
        task = tasks[name]
        known = made.get((id(count), id(task)))
        if known is None:
            used = {r: count * v for r, v in task.items() if r in real}
            dominant = (
                max((v / real[r] for r, v in used.items()), default=Fraction(0)) if count else count
            )
            known = made[id(count), id(task)] = (used, dominant)
        out[name] = Share(count, dict(known[0]), known[1], weights[name])
    return out


def _measure(policy: str, task: Vector, capacity: Vector) -> Fraction:
    """How much one task adds to a user's share, by the policy's own measure."""
    shares = {r: v / capacity[r] for r, v in task.items() if r in capacity}
    if not shares:
        return Fraction(0)
    if policy == "asset":
        return sum(shares.values(), Fraction(0))
    if policy == "cpu" and shares.get("cpus"):
        return shares["cpus"]
    return max(shares.values())  # drf, wdrf, flat; cpu for tasks without CPU


def progressive_filling(
    capacity: Vector,
    tasks: Mapping[str, Vector],
    weights: Mapping[str, Fraction],
    limits: Mapping[str, Fraction | None],
    measure: Mapping[str, Fraction],
) -> dict[str, Fraction]:
    """Raise every active user's measured share / weight at one rate; stop a user when a
    resource it needs is full or its limit is reached. Exact: it jumps from event to event."""
    count = dict.fromkeys(tasks, Fraction(0))
    used = dict.fromkeys(capacity, Fraction(0))

    def below(n: str) -> bool:
        limit = limits[n]
        return limit is None or count[n] < limit

    active = {n for n in tasks if measure[n] > 0 and below(n)}
    while active:
        rate = {n: weights[n] / measure[n] for n in active}  # tasks per unit of level
        step: Fraction | None = None
        for r, cap in capacity.items():
            growth = sum((rate[n] * tasks[n].get(r, 0) for n in active), Fraction(0))
            if growth > 0:
                candidate = (cap - used[r]) / growth
                step = candidate if step is None else min(step, candidate)
        for n in active:
            limit = limits[n]
            if limit is not None:
                candidate = (limit - count[n]) / rate[n]
                step = candidate if step is None else min(step, candidate)
        if step is None:  # nothing limits anyone: an endless user of nothing finite
            raise IdealError("some user's tasks take no resource the cluster has")
        for n in active:
            count[n] += rate[n] * step
            for r, v in tasks[n].items():
                used[r] += rate[n] * step * v
        full = {r for r, cap in capacity.items() if used[r] >= cap}
        active = {n for n in active if not any(r in full for r in tasks[n]) and below(n)}
    return count


def _tree_filling(
    policy: str,
    capacity: Vector,
    real: Vector,
    users: Sequence[User],
    tasks: Mapping[str, Vector],
    limits: Mapping[str, Fraction | None],
    pool_weights: Mapping[tuple[str, ...], Fraction | float | int],
    fifo: Fifo = (),
) -> dict[str, Fraction]:
    """The tree policies' ideal (`master.allocation.tree_ideal`): each user a leaf under its pool,
    filled exactly, event to event."""
    leaves = []
    dominant: dict[str, Fraction] = {}
    # (users often share a task size: each is worked out once, and its users given one
    # `use`, which the filling folds into one leaf where they are siblings)
    shapes: dict[tuple[tuple[str, Fraction], ...], tuple[Fraction, Vector]] = {}
    by_task: dict[int, tuple[Fraction, Vector]] = {}  # ... and by the task given, at once
    for u in users:
        known = by_task.get(id(tasks[u.name]))
        if known is None:
            shape = tuple(tasks[u.name].items())
            known = shapes.get(shape)
            if known is None:
                task = {r: v / capacity[r] for r, v in shape if r in capacity}
                top = max((v for r, v in task.items() if r in real), default=Fraction(0))
                use = {r: v / top for r, v in task.items()} if top else {}
                known = shapes[shape] = (top, use)
            by_task[id(tasks[u.name])] = known
        dom, use = known
        limit = limits[u.name]
        if dom == 0 or limit == 0:
            continue
        dominant[u.name] = dom
        cap = None if limit is None else limit * dom
        leaves.append(Leaf(u.name, tuple(u.path), exact(u.weight), use, cap))
    pools = {tuple(p): exact(w) for p, w in pool_weights.items()}
    try:
        shares = tree_filling(policy, sorted(real), leaves, pools, fifo=fifo)
    except ValueError as e:
        raise IdealError(str(e)) from None
    counts: dict[str, Fraction] = {}
    made: dict[tuple[int, int], Fraction] = {}  # (users folded alike share one share)
    for n in tasks:
        share = shares.get(n)
        if share is None:
            counts[n] = Fraction(0)
            continue
        count = made.get((id(share), id(dominant[n])))
        if count is None:
            count = made[id(share), id(dominant[n])] = share / dominant[n]
        counts[n] = count
    return counts


def _fifo(
    capacity: Vector,
    order: Sequence[str],
    tasks: Mapping[str, Vector],
    limits: Mapping[str, Fraction | None],
) -> dict[str, Fraction]:
    """Whoever came first takes all it can; the next takes what is left; and so on."""
    free = dict(capacity)
    count = {}
    for name in order:
        fits = min(free[r] / v for r, v in tasks[name].items() if r in free)
        limit = limits[name]
        count[name] = fits if limit is None else min(fits, limit)
        for r, v in tasks[name].items():
            if r in free:
                free[r] -= count[name] * v
    return count


def flattened_weights(
    users: Sequence[User], pool_weights: Mapping[tuple[str, ...], Fraction | float | int]
) -> dict[str, Fraction]:
    """Each user's weight with the tree flattened: at every level of its path, its pool's
    weight over the weights of that pool and its siblings (sub-pools with users under them,
    and users sitting beside them), down to the user's own weight among its pool's
    children. The lecture's pool of 30% with sub-pools of 20% and 80% gives 6% and 24%."""
    present = {u.path[:i] for u in users for i in range(1, len(u.path) + 1)}

    def children(parent: tuple[str, ...]) -> Fraction:
        pools = (exact(pool_weights.get(q, 1)) for q in present if q[:-1] == parent and q)
        beside = (exact(u.weight) for u in users if u.path == parent)
        return sum(pools, Fraction(0)) + sum(beside, Fraction(0))

    out = {}
    for u in users:
        share = Fraction(1)
        for depth in range(1, len(u.path) + 1):
            node = u.path[:depth]
            share *= exact(pool_weights.get(node, 1)) / children(node[:-1])
        out[u.name] = share * exact(u.weight) / children(u.path)
    return out


def _ceei(
    capacity: Vector,
    tasks: Mapping[str, Vector],
    weights: Mapping[str, Fraction],
    limits: Mapping[str, Fraction | None],
) -> dict[str, Fraction]:
    """Maximise sum w log x subject to the capacities, by Newton's method on the dual
    (one price per resource): x_k = w_k / (p . d_k). The answer is snapped to the nearest
    fraction with a small denominator when that is feasible and as good, else kept as
    the closest fraction found."""
    names = [n for n in tasks if limits[n] != 0]
    resources = sorted(capacity)
    d = {n: [float(tasks[n].get(r, 0) / capacity[r]) for r in resources] for n in names}
    w = {n: float(weights[n]) for n in names}
    cap = {n: math.inf if (limit := limits[n]) is None else float(limit) for n in names}
    p = [1.0 for _ in resources]

    def demand(prices: list[float]) -> dict[str, float]:
        out = {}
        for n in names:
            cost = sum(pi * di for pi, di in zip(prices, d[n], strict=True))
            x = w[n] / cost if cost > 0 else math.inf
            out[n] = min(x, cap[n])
        return out

    def dual(prices: list[float]) -> float:
        x = demand(prices)
        value = sum(prices)  # each capacity is 1 once normalised
        for n in names:
            cost = sum(pi * di for pi, di in zip(prices, d[n], strict=True))
            if x[n] < cap[n]:
                value -= w[n] * math.log(cost)
            else:
                value -= cost * x[n] - w[n] * (math.log(w[n] / x[n]) if x[n] > 0 else 0)
        return value

    for _ in range(200):
        x = demand(p)
        grad = [1.0 - sum(x[n] * d[n][j] for n in names) for j in range(len(resources))]
        hess = [[0.0] * len(resources) for _ in resources]
        for n in names:
            cost = sum(pi * di for pi, di in zip(p, d[n], strict=True))
            if x[n] < cap[n]:
                for a in range(len(resources)):
                    for b in range(len(resources)):
                        hess[a][b] += w[n] * d[n][a] * d[n][b] / cost**2
        step = _solve(hess, [-g for g in grad])
        # keep prices non-negative and the dual decreasing (damped Newton)
        t, before = 1.0, dual(p)
        while t > 1e-12:
            trial = [max(pi + t * si, 1e-15) for pi, si in zip(p, step, strict=True)]
            if dual(trial) <= before + 1e-15:
                break
            t /= 2
        p = trial
        if max(abs(s) for s in step) < 1e-13:
            break
    x = demand(p)
    return {n: _snap(x.get(n, 0.0)) for n in tasks}


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Solve a small linear system (Gaussian elimination; singular pivots regularised)."""
    n = len(b)
    m = [[*row, b[i]] for i, row in enumerate(a)]
    for i in range(n):
        m[i][i] += 1e-12
        pivot = max(range(i, n), key=lambda r: abs(m[r][i]))
        m[i], m[pivot] = m[pivot], m[i]
        for r in range(i + 1, n):
            f = m[r][i] / m[i][i]
            for c in range(i, n + 1):
                m[r][c] -= f * m[i][c]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (m[i][n] - sum(m[i][c] * x[c] for c in range(i + 1, n))) / m[i][i]
    return x


def _snap(value: float) -> Fraction:
    return Fraction(value).limit_denominator(10_000) if math.isfinite(value) else Fraction(0)
