"""Preemption as policy: fair shares, who is starving, and which tasks to take back.

The lecture's rules, free of I/O and of the clock (callers pass `now`), so the master and
the simulator drive the same code:

- a framework's **fair share** is its share in the policy's ideal for what everyone holds
  and still declares it wants, capped by that demand (`master.allocation.fair_shares`);
  a framework that declared nothing is taken to want more of what it runs;
- it is **starving** when it wants more, nothing free fits one of its tasks, and its
  dominant share is below `threshold` x its fair share (YARN's
  fairSharePreemptionThreshold) -- for long enough, which the caller times;
- **victims** are tasks of frameworks above their fair share, the most over first, the
  youngest of each first (little work thrown away), never so many that a victim drops
  below its own fair share, and only on one node at a time: enough that one of the
  starving framework's tasks fits there, because an offer is one node.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from master.allocation.claim_use import ClaimUse
from master.allocation.fair_shares import Contender, contenders_pools, fair_allocation
from master.allocation.planning import (
    EPSILON,
    PART,
    Cluster,
    RunningTask,
    counted,
    part_name,
    planning_path,
)
from master.allocation.quota import ancestors_or_self, gap
from master.allocation.sorter import Millis
from protocol.wire.reservations import is_plain, offered_to, parse_key
from protocol.wire.resources import SCALE, add_millis, dominant_share

VICTIM_ORDERS = ("youngest", "oldest")


def fits(task: Mapping[str, int], free: Mapping[str, int]) -> bool:
    return all(free.get(n, 0) >= v for n, v in task.items())


def room_for(free: Mapping[str, int], role: str) -> Mapping[str, int]:
    """What of a slave's free resources (by identity) a framework of `role` may use, as
    its task shapes name them: unreserved, and reserved for its role or one above it
    (stripped); others' reservations and volumes are no room of its."""
    if all(is_plain(key) for key in free):
        return free  # (the usual: a slave without reservations)
    room: Millis = {}
    for key, amount in free.items():
        if amount <= 0:
            continue
        if is_plain(key):
            room[key] = room.get(key, 0) + amount
            continue
        rid = parse_key(key)
        if rid.volume is None and rid.role and offered_to(rid.role, role):
            room[rid.base] = room.get(rid.base, 0) + amount
    return room


def is_starving(
    contender: Contender,
    share: float,
    fair: float,
    threshold: float,
    free: Iterable[Mapping[str, int]],
) -> bool:
    """Below `threshold` x its fair share, wanting more, and nothing free fits it."""
    if not contender.wants_more() or share >= threshold * fair - EPSILON:
        return False
    shapes = contender.shapes()
    if not shapes:
        return False  # we cannot tell what to free for it
    return not any(fits(task, room) for room in free for task in shapes)


@dataclass(frozen=True, slots=True)
class Plan:
    """Free room for one task of `claimant` on `slave_id` by ending `victims`."""

    claimant: str
    slave_id: str
    task: Millis
    victims: tuple[RunningTask, ...]


def _need(task: Mapping[str, int], free: Mapping[str, int]) -> Millis:
    return {n: v - free.get(n, 0) for n, v in task.items() if v > free.get(n, 0)}


VictimRule = Callable[[Cluster, RunningTask, str], bool]  # (books, task, claimant)


def fair_share_rule(books: Cluster, task: RunningTask, claimant: str) -> bool:
    """The usual rule: a victim may lose the task while over its fair share
    (`Cluster.may_lose`)."""
    return books.may_lose(task, claimant)


def plan_on_slave(
    cluster: Cluster,
    claimant: str,
    slave_id: str,
    task: Millis,
    order: str = "youngest",
    may_lose: VictimRule = fair_share_rule,
) -> tuple[RunningTask, ...] | None:
    """The tasks to end on one slave so that `task` fits there, or None if it cannot be
    done without taking from frameworks `may_lose` keeps (by default: at or below their
    fair share)."""
    need = _need(task, cluster.free.get(slave_id, {}))
    if not need:
        return ()
    held = {f: dict(h) for f, h in cluster.held.items()}
    parts = {f: {r: dict(h) for r, h in roles.items()} for f, roles in cluster.parts.items()}
    trial = Cluster(
        cluster.total, {}, held, cluster.fair, {}, cluster.fair_held, cluster.paths,
        fifo=cluster.fifo, parts=parts, claiming=cluster.claiming,
    )  # fmt: skip
    claimed = cluster.claimed
    candidates = [
        t
        for t in cluster.running.get(slave_id, [])
        if t.framework_id != claimant
        and t.framework_id not in claimed
        and any(t.resources.get(n, 0) for n in need)
    ]
    youngest = order == "youngest"
    chosen: list[RunningTask] = []
    while need:
        eligible = [t for t in candidates if may_lose(trial, t, claimant)]
        if not eligible:
            return None
        # the most over first: its group where it meets the claimant, then itself
        standing = {t.framework_id: trial.standing(t, claimant) for t in eligible}
        group_top = max(g for g, _ in standing.values())
        near = [t for t in eligible if standing[t.framework_id][0] >= group_top - EPSILON]
        own_top = max(standing[t.framework_id][1] for t in near)
        mine = [t for t in near if standing[t.framework_id][1] >= own_top - EPSILON]
        victim_fw = min(t.framework_id for t in mine)  # ties: a stable order
        theirs = [t for t in mine if t.framework_id == victim_fw]
        pick = (
            max(theirs, key=lambda t: (t.started, t.task_id))
            if youngest
            else min(theirs, key=lambda t: (t.started, t.task_id))
        )
        chosen.append(pick)
        candidates.remove(pick)
        trial.take(pick)
        for n, v in pick.resources.items():
            if n in need:
                need[n] -= v
        need = {n: v for n, v in need.items() if v > 0}
        candidates = [t for t in candidates if any(t.resources.get(n, 0) for n in need)]
    return tuple(chosen)


Key = tuple[int, float, str]  # a plan's: its victims, the work they lose, its slave

PLANNED_SHAPES = 4  # a claimant's declared task shapes preemption plans for, at most


def fewest_shapes(shapes: Sequence[Millis], total: Mapping[str, int]) -> list[Millis]:
    """The shapes worth planning for: none that holds another in full (room for it is room
    for the other, at no fewer victims), the smallest by dominant share first, at most
    PLANNED_SHAPES -- the check runs on the master's loop, and a Request may declare 100
    shapes: planning each on every slave cost 100 times one."""
    distinct = list({tuple(sorted(s.items())): s for s in shapes if s}.values())
    distinct.sort(key=lambda s: (dominant_share(s, total), sorted(s.items())))
    kept: list[Millis] = []
    for shape in distinct:
        if not any(fits(smaller, shape) for smaller in kept):
            kept.append(shape)
            if len(kept) == PLANNED_SHAPES:
                break
    return kept


def plan_preemption(
    cluster: Cluster,
    claimant: str,
    shapes: Sequence[Millis],
    *,
    now: float,
    short: Callable[[Mapping[str, int]], bool],
    order: str = "youngest",
    max_tasks: int | None = None,
    may_lose: VictimRule = fair_share_rule,
) -> list[Plan]:
    """Plans, one task of `claimant` each, while `short(what it would hold)` says it is
    still short (of its fair share, or its guarantee). Applies each plan to `cluster`, so
    several claimants can be planned one after another on the same books."""
    plans: list[Plan] = []
    shapes = fewest_shapes(shapes, cluster.total)

    def best_on(slave_id: str) -> tuple[Key, Plan] | None:
        best: tuple[Key, Plan] | None = None
        for task in shapes:
            victims = plan_on_slave(cluster, claimant, slave_id, task, order, may_lose)
            if victims is None or not victims:
                continue  # impossible here; or it fits already (then it is not starving)
            key = (len(victims), sum(now - v.started for v in victims), slave_id)
            if best is None or key < best[0]:
                best = (key, Plan(claimant, slave_id, task, victims))
        return best

    # Each slave's best plan, kept from when it was made: a plan taken elsewhere mostly
    # leaves it as it was, or makes it worse (its victims' frameworks hold less, the
    # claimant more). So the best kept is made again on the books as they are now, and
    # taken if it still beats every other kept one; else it goes back with what it is
    # now. One plan costs a few slaves' plans, where a walk of every slave made planning
    # a claimant's fair share on a packed cluster quadratic in its slaves (4.9 s on the
    # master's loop at 400).
    kept: list[tuple[Key, Plan]] = []
    if shapes and short(cluster.held.get(claimant, {})):
        kept = [b for s in sorted(set(cluster.free) | set(cluster.running)) if (b := best_on(s))]
        heapq.heapify(kept)
    while kept and short(cluster.held.get(claimant, {})):
        if max_tasks is not None and len(plans) >= max_tasks:
            break
        slave_id = heapq.heappop(kept)[1].slave_id
        now_best = best_on(slave_id)
        if now_best is None:
            continue  # nothing more to free there
        if kept and kept[0][0] < now_best[0]:
            heapq.heappush(kept, now_best)  # another may be better now: asked next
            continue
        plan = now_best[1]
        _apply(cluster, plan)
        plans.append(plan)
        heapq.heappush(kept, now_best)  # (made again when it comes up)
    return plans


def _apply(cluster: Cluster, plan: Plan) -> None:
    free = cluster.free.setdefault(plan.slave_id, {})
    running = cluster.running.get(plan.slave_id, [])
    for victim in plan.victims:
        running.remove(victim)
        cluster.take(victim)
        for n, v in victim.resources.items():  # (the slave's room, by its own names)
            free[n] = free.get(n, 0) + v
    cluster.give(plan.claimant, plan.task)
    cluster.claimed.add(plan.claimant)
    for n, v in plan.task.items():
        free[n] = free.get(n, 0) - v


# -- the policy's memory: who has been starving since when, and who is doomed ----------------


@dataclass(frozen=True)
class PreemptionConfig:
    timeout: float | None = None  # starving this long below the threshold (None: off)
    threshold: float = 0.5  # x the fair share (YARN's fairSharePreemptionThreshold)
    notice: float = 2.0  # from the warning to the kill
    victims: str = "youngest"  # or "oldest"
    guarantee_timeout: float | None = None  # a role below its guarantee this long

    @property
    def on(self) -> bool:
        return self.timeout is not None or self.guarantee_timeout is not None


@dataclass(slots=True)
class Doomed:
    """A task chosen as a victim, warned and not ended yet."""

    claimant: str
    slave_id: str
    deadline: float
    killed: bool = False


@dataclass(frozen=True)
class Claim:
    claimant: str
    why: str  # "fair share", or "guarantee of role R"
    plans: list[Plan]
    role: str | None = None  # the claimant's role it is for (its hold's)
    guarantee: bool = False  # for `role`'s guarantee (else for a fair share)


@dataclass
class PreemptionStats:
    tasks_preempted: int = 0
    work_lost_seconds: float = 0.0
    rounds: int = 0


class Preemption:
    """Fair shares, starvation timers, plans and victims, for the master and the simulator
    alike: they feed it their books (`check`) and carry out what it decides."""

    def __init__(self, config: PreemptionConfig) -> None:
        self.config = config
        self.fair: dict[str, float] = {}
        self.fair_resources: dict[str, dict[str, float]] = {}
        self.fair_parts: dict[str, dict[str, float]] = {}  # a multi-role framework's, a role
        self.starving_since: dict[str, float] = {}  # framework, or "role:R"
        self.doomed: dict[tuple[str, str], Doomed] = {}  # (framework, task)
        self.claim_use = ClaimUse()  # whether claimants use what is freed for them
        self.stats = PreemptionStats()
        # each contender's principal and roles (whose its claims' waits are), as the last
        # check saw them
        self.whose: dict[str, tuple[str, tuple[str, ...]]] = {}
        self.wanted: dict[str, tuple[str, list[Millis]]] = {}  # and its role and shapes

    def check(
        self,
        now: float,
        policy: str,
        contenders: Sequence[Contender],
        cluster: Cluster,
        pool_weights: Mapping[str, float],
        quotas: Mapping[str, Any] | None = None,
        tree: bool = False,
        hold_until: float | None = None,
        fifo_pools: Mapping[str, Sequence[str]] | None = None,
    ) -> list[Claim]:
        """Update fair shares and timers; plan for whoever has starved long enough (and
        used the room its last claim freed: `claim_use`). The claims are recorded as
        doomed tasks; the caller warns, holds the room for each claimant until
        `hold_until` (None: no hold), and kills."""
        self.whose = {c.framework_id: (c.tenant, _roles(c)) for c in contenders}
        self.wanted = {c.framework_id: (c.role, c.shapes()) for c in contenders}
        self.update_fair(policy, cluster.total, contenders, pool_weights, fifo_pools)
        cluster.fair = dict(self.fair)
        cluster.fair_held = {
            f: {n: round(v * SCALE) for n, v in resources.items()}
            for f, resources in (*self.fair_resources.items(), *self.fair_parts.items())
        }
        cluster.fifo = fifo_pools or {}
        pools = contenders_pools(contenders, pool_weights) if tree else set()
        paths: dict[str, tuple[str, ...]] = {}
        for c in contenders:
            fid = c.framework_id
            if not c.roles:
                paths[fid] = planning_path(c.role, fid, tree, pools)
                continue
            # a multi-role framework: a member in each of its roles, as the ideal has it
            if fid not in cluster.parts:  # (less its doomed tasks, where the books say)
                cluster.parts[fid] = {role or "*": dict(held) for role, held, _ in c.roles}
            for role in cluster.parts[fid]:
                part = part_name(fid, role)
                paths[part] = planning_path(role, part, tree, pools)
        cluster.paths = paths
        wanted: list[tuple[float, Contender, str | None]] = []
        wanted += self._fair_share_claims(contenders, cluster, now)
        wanted += self._guarantee_claims(contenders, cluster, now, quotas or {}, tree)
        claims = []
        for _, c, role_of in sorted(wanted, key=lambda w: w[0]):
            claim = self._plan(c, role_of, cluster, now, contenders, quotas or {}, tree)
            if claim is not None:
                claims.append(claim)
                needs: dict[str, Millis] = {}  # by slave: every room freed there, summed
                for plan in claim.plans:
                    add_millis(needs.setdefault(plan.slave_id, {}), plan.task)
                victims = sum(len(plan.victims) for plan in claim.plans)
                self.claim_use.claimed(
                    c.framework_id, hold_until or now, needs, victims, c.tenant, _roles(c)
                )
        return claims

    def update_fair(
        self,
        policy: str,
        total: Mapping[str, int],
        contenders: Sequence[Contender],
        pool_weights: Mapping[str, float],
        fifo_pools: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.set_fair(fair_allocation(policy, total, contenders, pool_weights, fifo_pools))

    def set_fair(self, allocation: Mapping[str, tuple[float, dict[str, float]]]) -> None:
        """Take fair shares computed elsewhere (the master computes them off its loop); a
        multi-role framework's parts (`part_name`) kept apart, for planning."""
        whole = {f: found for f, found in allocation.items() if PART not in f}
        self.fair = {f: share for f, (share, _) in whole.items()}
        self.fair_resources = {f: resources for f, (_, resources) in whole.items()}
        self.fair_parts = {f: resources for f, (_, resources) in allocation.items() if PART in f}

    def _may_claim(self, c: Contender, now: float, slaves: Container[str]) -> bool:
        """Not while its victims are still to end, nor while its last claim's room is
        held for it or it (its principal, or a role of its) waits for leaving claims
        unused (`ClaimUse.may_claim`; `slaves`: those there now, the rooms on others no
        longer asked of it)."""
        fid = c.framework_id
        if any(d.claimant == fid for d in self.doomed.values()):
            return False
        return self.claim_use.may_claim(fid, now, c.tenant, slaves, _roles(c))

    def waiting(self, framework_id: str, now: float) -> tuple[float, int]:
        """Seconds it still waits for claims left unused, its principal's or a role's of
        its (`ClaimUse.waiting`), and how many its own principal left (0: a role-mate's
        wait), as the last check saw it."""
        tenant, roles = self.whose.get(framework_id, ("", ()))
        use = self.claim_use
        return use.waiting(framework_id, now, tenant, roles), use.unused(framework_id, tenant)

    def settled(self, framework_id: str, now: float) -> bool:
        """Neither a claim of its to be judged nor a wait of its principal's or its roles'
        for leaving one unused (`ClaimUse.settled`), as the last check saw it."""
        tenant, roles = self.whose.get(framework_id, ("", ()))
        return self.claim_use.settled(framework_id, now, tenant, roles)

    def _fair_share_claims(
        self, contenders: Sequence[Contender], cluster: Cluster, now: float
    ) -> list[tuple[float, Contender, str | None]]:
        timeout = self.config.timeout
        out: list[tuple[float, Contender, str | None]] = []
        if timeout is None:
            return out
        rooms: dict[str, list[Mapping[str, int]]] = {}  # by role: what each may use
        for c in contenders:
            fair = self.fair.get(c.framework_id, 0.0)
            share = cluster.share(c.framework_id)
            room = _rooms(rooms, cluster, c.role)
            starving = is_starving(c, share, fair, self.config.threshold, room)
            if not starving:
                self.starving_since.pop(c.framework_id, None)
                continue
            since = self.starving_since.setdefault(c.framework_id, now)
            if now - since >= timeout and self._may_claim(c, now, cluster.free):
                out.append((share / fair if fair else 1.0, c, None))
        return out

    def _guarantee_claims(
        self,
        contenders: Sequence[Contender],
        cluster: Cluster,
        now: float,
        quotas: Mapping[str, Any],
        tree: bool,
    ) -> list[tuple[float, Contender, str | None]]:
        timeout = self.config.guarantee_timeout
        out: list[tuple[float, Contender, str | None]] = []
        if timeout is None:
            return out
        rooms: dict[str, list[Mapping[str, int]]] = {}
        for role, quota in quotas.items():
            key = f"role:{role}"
            # (a multi-role framework is a member in those of its roles under it, holding
            # what it holds there)
            members = [c for c in contenders if _held_under(c, role, tree) is not None]
            wanting = [c for c in members if c.wants_more() and c.shapes()]
            # what the role holds, and what is reserved for it and idle, as the quota
            # stage counts consumed quota (Mesos's): an idle reservation meets a guarantee
            idle = (v for r, v in cluster.idle.items() if role in ancestors_or_self(r, tree))
            held = _sum([*(_held_under(c, role, tree) or {} for c in members), *idle])
            free_fits = any(
                fits(task, room)
                for c in wanting
                for room in _rooms(rooms, cluster, c.role)
                for task in c.shapes()
            )
            if not wanting or not gap(quota, held) or free_fits:
                self.starving_since.pop(key, None)
                continue
            since = self.starving_since.setdefault(key, now)
            if now - since >= timeout:
                out += [(-1.0, c, role) for c in wanting if self._may_claim(c, now, cluster.free)]
        return out

    def _plan(
        self,
        c: Contender,
        role: str | None,
        cluster: Cluster,
        now: float,
        contenders: Sequence[Contender],
        quotas: Mapping[str, Any],
        tree: bool,
    ) -> Claim | None:
        total = cluster.total
        if role is None:
            fair = self.fair.get(c.framework_id, 0.0)
            why = "fair share"

            def short(held: Mapping[str, int]) -> bool:
                return dominant_share(held, total) < fair - EPSILON

        else:
            quota = quotas[role]
            why = f"guarantee of role {role}"
            # what the role holds but the claimant's own, and what is reserved for it and
            # idle: as the claim counted it (an idle reservation meets a guarantee)
            # -- on the books as planning has them now: another member's claim planned
            # in this check counts (review 70: two members each took the whole gap)
            others = _sum(
                [
                    *(
                        _now_under(o, role, tree, cluster)
                        for o in contenders
                        if o.framework_id != c.framework_id
                    ),
                    *(v for r, v in cluster.idle.items() if role in ancestors_or_self(r, tree)),
                ]
            )

            # (a multi-role claimant's: what it holds in the role, and what plans add)
            start = dict(cluster.held.get(c.framework_id, {}))
            own = _now_under(c, role, tree, cluster)
            # the gap its tasks can close: a guarantee's disk, say, is not a claim for
            # room for tasks that name none (review 70: planning went on to its count)
            fills = {n for shape in c.shapes() for n, v in shape.items() if v > 0}

            def short(held: Mapping[str, int]) -> bool:
                added = {n: v - start.get(n, 0) for n, v in held.items()}
                lacking = gap(quota, _sum([others, own, added]))
                return any(n in fills for n in lacking)

        # a multi-role claimant stands, and its room is held, in one of its roles: the
        # guaranteed one's; for its fair share, the first of them, furthest below its part
        # of it first, where room can be freed for it
        in_roles = _short_parts(c, cluster) if role is None else [_role_under(c, role, tree)]
        plans: list[Plan] = []
        for in_role in in_roles:
            if in_role is not None:
                cluster.claiming[c.framework_id] = in_role
            plans = plan_preemption(
                cluster,
                c.framework_id,
                c.shapes(),
                now=now,
                short=short,
                order=self.config.victims,
                max_tasks=sum(n for _, n in c.demand) if c.demand is not None else None,
                may_lose=fair_share_rule
                if role is None
                else guarantee_rule(role, contenders, quotas, tree),
            )
            if plans:
                break
        if not plans:
            return None
        self.starving_since.pop(c.framework_id if role is None else f"role:{role}", None)
        deadline = now + self.config.notice
        for plan in plans:
            for v in plan.victims:
                self.doomed[(v.framework_id, v.task_id)] = Doomed(
                    c.framework_id, v.slave_id, deadline
                )
        self.stats.rounds += 1
        # (a guarantee's room is held in the claimant's role under it: review 70)
        return Claim(c.framework_id, why, plans, in_role, guarantee=role is not None)

    def due(self, now: float) -> list[tuple[str, str, Doomed]]:
        """Doomed tasks whose deadline has come and that are not being killed yet."""
        out = []
        for (framework_id, task_id), d in self.doomed.items():
            if not d.killed and d.deadline <= now:
                d.killed = True
                out.append((framework_id, task_id, d))
        return out

    def ended(
        self,
        framework_id: str,
        task_id: str,
        *,
        finished: bool,
        ran: float,
        now: float | None = None,
    ) -> bool:
        """A task ended (at `now`, if known); True if it was a victim that did not finish
        on its own (its work, `ran` seconds of it, is thrown away)."""
        d = self.doomed.pop((framework_id, task_id), None)
        if d is not None:
            self.claim_use.victim_ended(d.claimant, now)
        if d is None or finished:
            return False
        self.stats.tasks_preempted += 1
        self.stats.work_lost_seconds += max(0.0, ran)
        return True

    def forget(self, framework_id: str, now: float | None = None) -> None:
        """A framework left (at `now`, if known): its timers go, and so do victims it no
        longer owns; its claim is judged as it stands."""
        self.starving_since.pop(framework_id, None)
        self.claim_use.forget(framework_id, now)
        for key in [k for k in self.doomed if k[0] == framework_id]:
            del self.doomed[key]


def _short_parts(c: Contender, cluster: Cluster) -> list[str | None]:
    """A multi-role framework's roles, furthest below its part of its fair share first
    ([None]: it has one role)."""
    parts = cluster.parts.get(c.framework_id)
    if not parts:
        return [None]
    total = cluster.total

    def below(role: str) -> float:
        fair = dominant_share(cluster.fair_held.get(part_name(c.framework_id, role), {}), total)
        return dominant_share(parts[role], total) - fair

    return [*sorted(parts, key=below)]


def _roles(c: Contender) -> tuple[str, ...]:
    """Its roles (every one of a multi-role framework's)."""
    return tuple(role for role, _, _ in c.in_roles())


def _role_under(c: Contender, role: str, tree: bool) -> str | None:
    """The first of `c`'s roles under `role` (None: it has one role, or none there)."""
    if not c.roles:
        return None
    return next((r for r, _, _ in c.roles if role in ancestors_or_self(r, tree)), None)


def _held_under(c: Contender, role: str, tree: bool) -> Millis | None:
    """What `c` holds in its roles under `role` (None: it is in none of them)."""
    inside = [held for r, held, _ in c.in_roles() if role in ancestors_or_self(r, tree)]
    return _sum(inside) if inside else None


def _now_under(c: Contender, role: str, tree: bool, cluster: Cluster) -> Millis:
    """What `c` holds under `role` on planning's books now: what it held there, and what
    plans made in this check gave it or took from it since (counted where it holds)."""
    before = _held_under(c, role, tree)
    if before is None:
        return {}
    now = cluster.held.get(c.framework_id, {})
    moved = {n: v - c.held.get(n, 0) for n, v in now.items() if v != c.held.get(n, 0)}
    return _sum([before, moved]) if moved else before


def guarantee_rule(
    role: str, contenders: Sequence[Contender], quotas: Mapping[str, Any], tree: bool
) -> VictimRule:
    """Who may lose a task to a role short of its guarantee: a guarantee is served before
    fair shares (Mesos's quota), so any framework outside the role, at or below its fair
    share too, so long as each guarantee on its own role's path stays met without the
    task (review 69: the fair-share rule left a guaranteed role short for as long as
    another's tasks ran)."""
    role_of = {c.framework_id: c.role for c in contenders}

    def may_lose(books: Cluster, task: RunningTask, claimant: str) -> bool:
        # (a multi-role framework's task is its role's: review 70)
        mine = task.role or role_of.get(task.framework_id, "")
        if role in ancestors_or_self(mine, tree):
            return False  # (the guaranteed role's own: it gains nothing)
        lost = counted(task)
        theirs = ancestors_or_self(role_of.get(claimant, role), tree)
        for node in ancestors_or_self(mine, tree):
            quota = quotas.get(node)
            if quota is None or not quota.guarantee or node in theirs:
                continue  # (under a node of both the task moves within it: review 70)
            held = _sum(_now_under(c, node, tree, books) for c in contenders)
            after = {n: v - lost.get(n, 0) for n, v in held.items()}
            before = gap(quota, held)
            # (a gap it deepens in what the task holds: one in a resource its tasks never
            # use, its disk say, is no shield -- review 70)
            if any(v > before.get(n, 0) for n, v in gap(quota, after).items() if lost.get(n)):
                return False
        return True

    return may_lose


def _rooms(
    rooms: dict[str, list[Mapping[str, int]]], cluster: Cluster, role: str
) -> list[Mapping[str, int]]:
    """Every slave's room for a framework of `role` (`room_for`), worked out once a role."""
    room = rooms.get(role)
    if room is None:
        room = rooms[role] = [room_for(free, role) for free in cluster.free.values()]
    return room


def _sum(vectors: Iterable[Mapping[str, int]]) -> Millis:
    out: Millis = {}
    for v in vectors:
        for n, x in v.items():
            out[n] = out.get(n, 0) + x
    return out
