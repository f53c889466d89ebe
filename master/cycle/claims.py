"""Preemption in the offer cycle: the books as planning sees them (`planning_cluster`),
each framework as a `Contender`, and the holds that keep the room a claim frees for its
claimant (`hold_claim`) until its offer can go out (`hold_until`)."""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping

from master.allocation.allocator import Allocator
from master.allocation.fair_shares import Contender
from master.allocation.planning import Cluster, RunningTask, counted
from master.allocation.preemption import Claim
from master.allocation.quota import ancestors_or_self
from master.allocation.sorter import Millis
from master.cycle.state import Wish
from protocol.wire.resources import Resources, sub_millis_clamped

HOLD_EXTRA = 10.0  # seconds: a node freed by preemption is held this long past the kill


def contender(a: Allocator, wish: Wish) -> Contender:
    """A framework as preemption sees it: its weight and holdings from the allocator, its
    wishes from whoever keeps its books, cut to what its role's quota limits still let it
    be offered; it wants offers while connected and not suppressed."""
    fid = wish.framework_id
    # (a multi-role framework wants offers while one of its roles does: review 70)
    books = [a.frameworks[c] for c in a.clients.of(fid) if c in a.frameworks]
    held_for = not books or any(not book.suppressed for book in books)
    held = dict(a.allocation(fid).millis)
    demand, room = wish.demand, True
    if a.quotas:  # (what its limits let it hold more: nothing past them)
        limited = limit_room(a, wish.role, held)
        if demand is not None:
            demand = within_limits(demand, limited)
        elif wish.shape:
            room = all(limited.get(n, v) >= v for n, v in wish.shape.items())
    weights = a.framework_weights(fid)
    roles: tuple[tuple[str, Millis, float], ...] = ()
    if len(weights) > 1:  # (a multi-role framework: a client, and a share, in each role)
        roles = tuple((r, dict(a.allocation(fid, r).millis), w) for r, w in weights.items())
    return Contender(
        fid,
        wish.role,
        sum(weights.values()),
        held,
        wants=wish.connected and held_for and room,
        demand=demand,
        shape=wish.shape,
        tenant=wish.tenant,
        roles=roles,
    )


def limit_room(a: Allocator, role: str, own: Mapping[str, int]) -> Millis:
    """What the quota limits on `role`'s path let a framework holding `own` there hold
    more, by resource named in a limit (one not named: no bound). Its own holdings, not
    the role's or the pool's: what others under a limited pool hold, preemption may take
    back for it within the pool (review 70: a pool's limit, filled by one child, cut its
    sibling's demand to nothing, and the sibling never starved)."""
    room: Millis = {}
    for node in ancestors_or_self(role, a.roles.is_tree()):
        quota = a.quotas.get(node)
        limit = quota.limit if quota is not None else None
        if limit is None:
            continue
        for name, amount in limit.millis.items():
            left = max(0, amount - own.get(name, 0))
            room[name] = min(room.get(name, left), left)
    return room


def within_limits(
    demand: list[tuple[Millis, int]], room: Mapping[str, int]
) -> list[tuple[Millis, int]]:
    """Declared tasks, as many as `room` (what the role's limits let it hold more; a
    resource it does not name is not bounded) holds, in their order: a role at its limit
    starves for nothing, and preemption frees no room for it that its offers could not
    take (review 69)."""
    left = dict(room)
    kept = []
    for task, count in demand:
        fit = min((left[n] // v for n, v in task.items() if v > 0 and n in left), default=count)
        n = min(count, fit)
        for name, v in task.items():
            if name in left:
                left[name] -= v * n
        kept.append((task, n))
    return kept


def planning_cluster(
    a: Allocator,
    framework_ids: Iterable[str],
    tasks: Iterable[RunningTask],
    doomed: Container[tuple[str, str]],
) -> Cluster:
    """The books as planning sees them: what is free (less every hold), who holds what --
    less its tasks already doomed, whose loss is decided: else the next check, before they
    end, would take a victim below its fair share again --, and the tasks that may still
    be chosen (none already doomed, none on a slave out of the offers: the room a kill
    frees there would be offered to nobody)."""
    held = {fid: dict(a.allocation(fid).millis) for fid in framework_ids}
    parts: dict[str, dict[str, Millis]] = {}  # a multi-role framework's, by role
    for fid in held:
        roles = a.clients.roles(fid)
        if roles is not None and len(roles) > 1:
            parts[fid] = {role: dict(a.allocation(fid, role).millis) for role in roles}
    running: dict[str, list[RunningTask]] = {}
    slaves = a.slaves
    for task in tasks:
        if (task.framework_id, task.task_id) not in doomed:
            slave = slaves.get(task.slave_id)
            if slave is not None and slave.active:
                running.setdefault(task.slave_id, []).append(task)
        elif task.framework_id in held:
            # (counted as its books count it, stripped; they may lag)
            sub_millis_clamped(held[task.framework_id], counted(task))
            mine = parts.get(task.framework_id, {})
            part = mine.get(task.role or "") or next(iter(mine.values()), None)
            if part is not None:
                sub_millis_clamped(part, counted(task))
    total = a.offerable_total().millis  # (room on a slave out of the offers is nobody's)
    return Cluster(total, a.unheld(), held, {}, running, idle=a.idle_reserved(), parts=parts)


def hold_until(now: float, notice: float, allocation_interval: float) -> float:
    """How long room freed for a claimant is held for it: past the kill deadline, and two
    rounds more for its offer to go out."""
    return now + notice + HOLD_EXTRA + 2 * allocation_interval


def hold_claim(a: Allocator, claim: Claim, until: float) -> None:
    """Hold the room each of the claim's plans frees for the claimant until `until`."""
    for plan in claim.plans:
        a.reserve(
            plan.slave_id, claim.claimant, Resources.from_millis(plan.task), until, claim.role
        )
