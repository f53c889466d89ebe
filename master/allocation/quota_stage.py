"""Quota in an allocation round: what a role's offer may hold, given limits on its path and
others' unmet guarantees, and which roles go first (Mesos's quota stage); and each role
node's standing (weight, share, promise, quota) for the shell to show.

It reads the allocator's books (the role order, the cluster's total and what is
allocated) and keeps the quotas; it changes no books.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from master.allocation.ledger import (
    Floor,
    FrameworkBook,
    Picked,
    allocatable,
    anything,
    wants_offer,
)
from master.allocation.quota import Quota, ancestors_or_self, cap_offer, gap
from master.allocation.reserved import IdleReservations
from master.allocation.role_order import RoleOrder
from master.allocation.sorter import Millis, Sorter
from protocol.wire.resources import Resources, add_millis, dominant_share


@dataclass(frozen=True, slots=True)
class RoleStanding:
    """A role node as the allocation sees it (the shell makes the wire's `RoleView`)."""

    role: str
    weight: float
    share: float  # dominant share of everything its subtree holds
    promise: float | None  # under a tree policy: the fraction of the cluster promised
    guarantee: Resources | None
    limit: Resources | None
    unsatisfiable: str  # why its guarantee cannot be met, if it cannot


class QuotaStage:
    def __init__(
        self,
        roles: RoleOrder,
        total: Millis,
        allocated: Millis,
        headroom: str,
        idle: IdleReservations | None = None,
    ):
        self.quotas: dict[str, Quota] = {}  # by role node (on a tree, pools too)
        # reserved and not allocated, by role: a role's quota counts its reservations
        self._idle = idle or IdleReservations()
        self._roles = roles
        self._total = total  # the cluster's (the allocator's book, read in place)
        self._allocated = allocated  # ... and what of it is offered or in use
        self._headroom_of = headroom  # whose unmet guarantees are held back (HEADROOM)
        # free and unreserved on slaves out of the offers (deactivated, draining,
        # disconnected): no room for a guarantee (the allocator keeps it current)
        self.out_of_offers: Millis = {}

    def held_by_role(self, role: str) -> Millis:
        """What a role node holds (on a tree: its whole subtree), offered or in use, and
        what is reserved for it and idle: Mesos counts a role's reservations as consumed
        quota."""
        held = self._roles.held(role)
        if self._idle.by_role:
            add_millis(held, self._idle.of_subtree(role, self._roles.hierarchical))
        return held

    def unsatisfiable(self) -> dict[str, str]:
        """Guarantees the cluster cannot meet, and why (reported, not refused)."""
        total = self._total
        out = {}
        for role, quota in self.quotas.items():
            over = [n for n, v in quota.guarantee.millis.items() if v > total.get(n, 0)]
            if over:
                out[role] = f"guarantees more {', '.join(over)} than the cluster has"
        return out

    def standings(self, configured: set[str]) -> list[RoleStanding]:
        """Every role node, every role with a quota and every `configured` one: weight,
        share, promise, quota."""
        roles, total = self._roles, self._total
        unsatisfiable = self.unsatisfiable()
        views = []
        for role in sorted(set(self.quotas) | configured | set(roles.names())):
            quota = self.quotas.get(role)
            views.append(
                RoleStanding(
                    role=role,
                    weight=roles.weight(role),
                    share=dominant_share(roles.held(role), total),
                    promise=roles.promise(role),
                    guarantee=quota.guarantee if quota and quota.guarantee else None,
                    limit=quota.limit if quota else None,
                    unsatisfiable=unsatisfiable.get(role, ""),
                )
            )
        return views

    def path(self, role: str) -> list[str]:
        """The role nodes a quota on which applies to `role`: itself, and on a tree its
        ancestors."""
        return ancestors_or_self(role, self._roles.hierarchical)

    def short_of_guarantee(self) -> set[str]:
        """Role nodes with demand whose guarantee is not met yet (and still can be)."""
        return {role for role in self.quotas if self._roles.wanting(role) and self.lack(role)}

    def lack(self, role: str) -> Millis:
        """What `role`'s guarantee still lacks that it could still get: the gap, cut down
        by the room left under every limit on its path (a guarantee a limit above it
        makes unreachable holds nothing back from anyone)."""
        lack = gap(self.quotas[role], self.held_by_role(role))
        for node in self.path(role):
            quota = self.quotas.get(node)
            if quota is None or quota.limit is None:
                continue
            held = self.held_by_role(node)
            for name, amount in quota.limit.millis.items():
                if name in lack:
                    lack[name] = min(lack[name], max(0, amount - held.get(name, 0)))
        return {k: v for k, v in lack.items() if v > 0}

    def up_to_guarantee(self, role: str, short: set[str], free: Millis) -> Millis:
        """An offer in the quota stage, as Mesos 1.9's first stage makes it. Of the
        resources the role still lacks, up to its unmet guarantee (the smallest gap among
        the short nodes on its path), under its limits only: a guarantee is given
        unconditionally, as in Mesos, even when the cluster is overcommitted by
        guarantees, so others' headroom does not cut it. Past its guarantee the role
        bursts, in the same offer, up to its limits while every unmet guarantee (its own
        too) stays free; the other resources of the slave come along, as a task needs
        them too, under its limits and leaving others' headroom alone. Nothing (the
        slave is left to the fair order) where the slave has none of what it lacks."""
        lacks: Millis = {}
        for node in self.path(role):
            if node in short:
                for name, lack in self.lack(node).items():
                    lacks[name] = min(lacks.get(name, lack), lack)
        if not lacks:
            return self.offerable(role, free)
        limited = self.offerable(role, free, headroom=False)
        toward = {name: min(limited[name], lack) for name, lack in lacks.items() if name in limited}
        if not toward:
            return {}  # no progress towards its guarantee here (Mesos skips the slave)
        offerable = self.offerable(role, free)
        unreserved, held_back = self._unreserved(), self._headroom(set())  # (its own too)
        out = dict(offerable)
        for name, given in toward.items():
            surplus = max(0, unreserved.get(name, 0) - held_back.get(name, 0))
            out[name] = min(limited[name], given + surplus)
        out = {k: v for k, v in out.items() if v > 0}
        if allocatable(out):
            return out
        # too little of it for an offer: what the role may have of the slave, if more
        for name, amount in out.items():
            offerable[name] = max(amount, offerable.get(name, 0))
        return offerable

    def under(self, role: str, short: set[str]) -> bool:
        return any(node in short for node in self.path(role))

    def offerable(self, role: str, free: Millis, *, headroom: bool = True) -> Millis:
        """What of `free` may go to a framework of `role`: under every limit on its path,
        and (with `headroom`) leaving alone what other roles' unmet guarantees need."""
        mine = set(self.path(role))
        limits = [
            (q.limit, self.held_by_role(node))
            for node in mine
            if (q := self.quotas.get(node)) is not None and q.limit is not None
        ]
        if not headroom:
            return cap_offer(free, limits, {}, {})
        return cap_offer(free, limits, self._headroom(mine), self._unreserved())

    def _unreserved(self) -> Millis:
        """The cluster's unreserved resources free where they can be offered (Mesos's
        available headroom): its total less what is allocated, idle reservations and
        what is free on slaves out of the offers."""
        reserved, away = self._idle.all, self.out_of_offers
        return {
            k: v - self._allocated.get(k, 0) - reserved.get(k, 0) - away.get(k, 0)
            for k, v in self._total.items()
        }

    def _holds_headroom(self, node: str) -> bool:
        """Whether `node`'s unmet guarantee is held back from others: always (`all`, as
        Mesos), or while its frameworks want offers (`demand`)."""
        quota = self.quotas.get(node)
        if quota is None or not quota.guarantee:
            return False
        return self._headroom_of == "all" or self._roles.wanting(node)

    def _headroom(self, mine: set[str]) -> Millis:
        """The unmet guarantees of the role nodes outside `mine` (a role's own path): what
        offers to `mine` must leave unallocated. On a tree, a guarantee inside another
        held one is part of it, and counts once, at the top (as Mesos counts top-level
        roles' guarantees)."""
        need: Millis = {}
        for node in self.quotas:
            if node in mine or not self._holds_headroom(node):
                continue
            above = self.path(node)[:-1]
            if any(a not in mine and self._holds_headroom(a) for a in above):
                continue  # counted in its ancestor's
            add_millis(need, self.lack(node))
        return need

    def held_back(self, role: str) -> dict[str, Millis]:
        """Whose unmet guarantees are held back from offers to `role`, and how much of
        each (`_headroom`'s sum, by role node: what `why` shows)."""
        mine = set(self.path(role))
        out: dict[str, Millis] = {}
        for node in self.quotas:
            if node in mine or not self._holds_headroom(node):
                continue
            if any(a not in mine and self._holds_headroom(a) for a in self.path(node)[:-1]):
                continue  # counted in its ancestor's
            lack = self.lack(node)
            if lack:
                out[node] = lack
        return out


def quota_pick(
    quota: QuotaStage,
    roles: RoleOrder,
    role_frameworks: Mapping[str, Sorter],
    frameworks: Mapping[str, FrameworkBook],
    now: float,
    floor: Floor,
) -> Callable[[str, Millis, float], Picked]:
    """A round's pick under quotas: the framework to offer a slave to, and what of it --
    what quota limits and other roles' guarantees leave (`ledger.first_wanting` picks
    without quotas). `floor` is the master's minimum offer. With roles side by side the
    walk is `first_framework`'s, as without quotas (the roles' order, then each role's;
    under `fifo` the frameworks by arrival across roles), each framework offered what its
    role may have."""
    flat = not roles.hierarchical

    def pick(slave_id: str, free: Millis, _: float) -> Picked:
        offer: dict[str, Millis] = {}  # what each role would be offered (made once a role)
        short = quota.short_of_guarantee()
        stage = [bool(short)]  # in the quota stage (roles below their guarantee)

        def wants(framework_id: str) -> bool:
            fw = frameworks[framework_id]
            offerable = offer.get(fw.role)
            if offerable is None:
                offerable = offer[fw.role] = (
                    quota.up_to_guarantee(fw.role, short, free)
                    if stage[0]
                    else quota.offerable(fw.role, free)
                )
            if not anything(offerable):
                return False
            return wants_offer(fw, slave_id, offerable, now, floor)

        picked: dict[str, str] = {}  # (the tree may ask several roles: by role)

        def role_wants(role: str) -> bool:
            framework_id = role_frameworks[role].first(wants)
            if framework_id is not None:
                picked[role] = framework_id
            return framework_id is not None

        # roles below their guarantee first (Mesos's quota stage), offered up to what
        # their guarantee still lacks whatever is held back for others; on a tree, those
        # under the deepest short nodes before the rest (a child's holdings count towards
        # its parent's guarantee, not the other way round)
        for tier in tiers(short, roles.hierarchical):
            if flat:  # (roles side by side: the framework walk, by arrival under fifo)

                def in_tier(framework_id: str, tier: set[str] = tier) -> bool:
                    return quota.under(frameworks[framework_id].role, tier) and wants(framework_id)

                found = roles.first_framework(role_frameworks, in_tier)
                if found is not None:
                    return found, offer[frameworks[found].role]
                continue

            def served(role: str, tier: set[str] = tier) -> bool:
                return quota.under(role, tier) and role_wants(role)

            guaranteed = roles.first(served)
            if guaranteed is not None:
                return picked[guaranteed], offer[guaranteed]
        if short:
            stage[0] = False
            offer.clear()
            picked.clear()
        if flat:
            found = roles.first_framework(role_frameworks, wants)
            return None if found is None else (found, offer[frameworks[found].role])
        chosen = roles.first(role_wants)
        if chosen is None:
            return None
        return picked[chosen], offer[chosen]

    return pick


def tiers(short: set[str], tree: bool) -> list[set[str]]:
    """The short role nodes in the order the quota stage serves them: on a tree the
    deepest (no short node below them), then all of them; none when nothing is short."""
    if not short or not tree:
        return [short] if short else []
    deepest = {s for s in short if not any(o.startswith(s + "/") for o in short)}
    return [short] if deepest == short else [deepest, short]
