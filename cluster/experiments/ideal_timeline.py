"""The ideal beside the real: what a spec's policy would give each framework, phase by
phase, with tasks infinitely divisible (`master.allocation.ideal`), and how far a run strays
from it.

A phase starts whenever the set of running frameworks or one of their task shapes
changes (a framework starts or stops, or its tasks change size). Its ideal holds from
then on; the run is compared with it only once it has settled (the longest task, plus two
allocation intervals, after the phase began), as the paper compares steady states.
Frameworks driven by jobs or traces have no one task shape: such specs get no ideal, and
so do policies the ideal does not model yet (hdrf, naive-hdrf, slots).
"""

from __future__ import annotations

from dataclasses import dataclass

from cluster.experiments.spec import Framework, Spec
from master.allocation.ideal import POLICIES, User, exact, ideal
from protocol.wire.resources import Resources


@dataclass(frozen=True)
class Phase:
    start: float
    tasks: dict[str, float]  # framework -> ideal tasks
    shares: dict[str, float]  # framework -> ideal dominant share


def _task_at(fw: Framework, t: float) -> Resources | None:
    task = fw.task
    for change in sorted(fw.changes, key=lambda c: c.at):
        if change.at <= t:
            task = change.task
    return task


def user_of(fw: Framework, task: Resources) -> User:
    """A framework as the ideal sees it: a leaf under its role (roles are pools of users)."""
    return User(
        fw.name,
        {r: exact(v) for r, v in task.items()},
        weight=exact(fw.weight),
        path=tuple((fw.role or fw.name).split("/")),
        limit=fw.max_running,
    )


def pool_weights(spec: Spec) -> dict[tuple[str, ...], float]:
    """The weights of the spec's roles (a framework's `weight` is its role's)."""
    return {tuple(role.split("/")): w for role, w in spec.role_weights().items()}


def limits(spec: Spec) -> dict[tuple[str, ...], dict[str, float]]:
    """The spec's quota limits, for the ideal (guarantees it does not model)."""
    return {
        tuple(role.split("/")): q.limit.to_dict()
        for role, q in spec.master.quota.items()
        if q.limit is not None
    }


def ideal_phases(spec: Spec, policy: str | None = None) -> list[Phase]:
    policy = policy or spec.master.policy
    if policy not in POLICIES or any(f.jobs or f.trace or f.swim for f in spec.frameworks):
        return []
    total = sum((r for _, r in spec.cluster.nodes()), Resources())
    times = {0.0}
    for fw in spec.frameworks:
        times.add(fw.start)
        if fw.stop is not None:
            times.add(fw.stop)
        times.update(c.at for c in fw.changes)
    pools = pool_weights(spec)
    phases = []
    for t in sorted(x for x in times if x < spec.run.duration):
        users = []
        for fw in spec.frameworks:
            task = _task_at(fw, t)
            running = fw.start <= t and (fw.stop is None or t < fw.stop)
            if running and task:
                users.append(user_of(fw, task))
        shares = ideal(policy, {r: exact(v) for r, v in total.items()}, users, pools, limits(spec))
        phases.append(
            Phase(
                t,
                {n: float(s.tasks) for n, s in shares.items()},
                {n: float(s.dominant_share) for n, s in shares.items()},
            )
        )
    return phases


def settle_seconds(spec: Spec) -> float:
    longest = 0.0
    for fw in spec.frameworks:
        d = fw.duration
        if d is not None:
            longest = max(longest, d.fixed or 0.0, d.uniform[1] if d.uniform else 0.0)
    return longest + 2 * spec.master.allocation_interval
