"""The ideal beside the real: what a spec's policy would give each framework, phase by
phase, with tasks infinitely divisible (`master.allocation.ideal`), and how far a run strays
from it.

A phase starts whenever the set of running frameworks or one of their task shapes
changes (a framework starts or stops, or its tasks change size). Its ideal holds from
then on; the run is compared with it only once it has settled (the longest task, plus two
allocation intervals, after the phase began), as the paper compares steady states; a
phase that ends before that (tasks that outlast the run) is compared at its last sample,
where the offer loop left it (`Results.distance_from_ideal`).
Frameworks driven by jobs or traces have no one task shape: such specs get no ideal.

A policy's ideal, and its users' weights, are those the master's preemption measures fair
shares with (`master.allocation.fair_shares`): `drf` is weighted DRF (the allocator weighs
roles under it), `slots` DRF's; on a tree the roles are pools, and under a flat policy a
framework weighs its part of its role's weight (`as_allocated`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from cluster.experiments.spec import Framework, Spec
from master.allocation.fair_shares import (
    IDEAL_POLICY,
    TREE_IDEALS,
    Contender,
    role_weights_kept,
)
from master.allocation.ideal import POLICIES, User, exact, ideal
from master.roles_file import QuotaSpec
from protocol.wire.resources import Resources


@dataclass(frozen=True)
class Phase:
    start: float
    tasks: dict[str, float]  # framework -> ideal tasks
    shares: dict[str, float]  # framework -> ideal dominant share


def user_of(fw: Framework, task: Resources) -> User:
    """A framework as the ideal sees it: a leaf under its role (roles are pools of users)."""
    return User(
        fw.name,
        {r: exact(v) for r, v in task.items()},
        weight=exact(fw.weight),
        path=tuple((fw.role or fw.name).split("/")),
        limit=fw.max_running,
    )


def as_allocated(
    policy: str,
    users: Sequence[User],
    frameworks: Sequence[Framework],
    weights: Mapping[str, float],
) -> tuple[str, list[User]]:
    """The ideal that stands for the allocator's `policy`, and `users` weighed as the
    allocator weighs them (as preemption's fair shares take both: `IDEAL_POLICY`): on a
    tree their roles are pools (`pools`) and they stand as they are; under a flat policy
    each framework of the spec weighs its part of its role's weight (`weights`,
    `Spec.role_weights`), and those of the role not in the question (not running, or
    with no one task shape) leave their parts to the others
    (`fair_shares.role_weights_kept`)."""
    question = IDEAL_POLICY.get(policy, policy)
    if question in TREE_IDEALS:
        return question, list(users)
    role_of = {fw.name: fw.role or fw.name for fw in frameworks}
    count = Counter(role_of.values())
    part = {name: weights.get(role, 1.0) / count[role] for name, role in role_of.items()}
    everyone = [Contender(name, role_of[name], part[name], {}, wants=True) for name in part]
    rows = [(u.name, (), part[u.name], u.path, u.limit) for u in users]
    kept = {row[0]: row[2] for row in role_weights_kept(rows, everyone, {})}
    return question, [replace(u, weight=exact(kept[u.name])) for u in users]


def arrival_order(frameworks: Sequence[Framework], policy: str) -> Sequence[Framework]:
    """Under `fifo`, the spec's frameworks in the order they come: by start, those starting
    together as the spec lists them (as the simulator adds them), the order its ideal
    serves them in, as the allocator does, whatever their roles. (Other ideals do not
    depend on the order: the spec's is kept.)"""
    if IDEAL_POLICY.get(policy, policy) != "fifo":
        return frameworks
    return sorted(frameworks, key=lambda fw: fw.start)


def pools(weights: Mapping[str, float]) -> dict[tuple[str, ...], float]:
    """Roles' weights (`Spec.role_weights`) as the ideal's pools: a framework's `weight` is
    its role's."""
    return {tuple(role.split("/")): w for role, w in weights.items()}


def limits(quotas: Mapping[str, QuotaSpec]) -> dict[tuple[str, ...], dict[str, float]]:
    """The quota limits (a spec's `master.quota`), for the ideal (guarantees it does not
    model)."""
    return {
        tuple(role.split("/")): q.limit.to_dict()
        for role, q in quotas.items()
        if q.limit is not None
    }


@dataclass(frozen=True)
class Ideal:
    """A spec's ideal under one policy, phase by phase, and how long after a phase starts
    a run is compared with it."""

    policy: str
    phases: list[Phase]
    settle: float


def ideal_of(
    spec: Spec, total: Resources, weights: Mapping[str, float], policy: str | None = None
) -> Ideal:
    """The spec's ideal under the allocator's `policy` (by default the spec's;
    `as_allocated`), the spec read once here: `total` and `weights` are what the caller
    read of it already (its cluster's total, `Spec.role_weights`)."""
    policy = policy or spec.master.policy
    frameworks, interval = spec.frameworks, spec.master.allocation_interval
    longest = 0.0  # the longest task: a phase settles that long (and two rounds) after it starts
    for fw in frameworks:
        d = fw.duration
        if d is not None:
            longest = max(longest, d.fixed or 0.0, d.uniform[1] if d.uniform else 0.0)
    settle = longest + 2 * interval
    if IDEAL_POLICY.get(policy) not in POLICIES or any(
        f.jobs or f.trace or f.swim for f in frameworks
    ):
        return Ideal(policy, [], settle)
    times = {0.0}
    for fw in frameworks:
        times.add(fw.start)
        if fw.stop is not None:
            times.add(fw.stop)
        times.update(c.at for c in fw.changes)
    capacity = {r: exact(v) for r, v in total.items()}
    shared, capped = pools(weights), limits(spec.master.quota)
    phases = []
    for t in sorted(x for x in times if x < spec.run.duration):
        users = []
        for fw in arrival_order(frameworks, policy):
            task = fw.task_at(t)
            running = fw.start <= t and (fw.stop is None or t < fw.stop)
            if running and task:
                users.append(user_of(fw, task))
        question, weighed = as_allocated(policy, users, frameworks, weights)
        shares = ideal(question, capacity, weighed, shared, capped)
        phases.append(
            Phase(
                t,
                {n: float(s.tasks) for n, s in shares.items()},
                {n: float(s.dominant_share) for n, s in shares.items()},
            )
        )
    return Ideal(policy, phases, settle)
