"""The allocation module: who is offered which slave's free resources, and when.

Free of I/O and of wall-clock time (callers pass `now`), so the master, the simulator and
the benchmarks all drive the very same code.

The books: every slave's total and what is allocated on it (offered or in use) per
framework; every framework's role, filters and whether it wants offers. The order: a
sorter of roles (weights belong to roles, as in Mesos) and, inside each role, a sorter of
its frameworks -- with one framework per role this is plain weighted DRF.

An allocation round (`allocate`) walks the slaves in a shuffled order and gives each
slave's whole free resources to the first framework, lowest share first, that wants offers:
active, not suppressed, and not filtered for that slave. The offered resources count as
allocated at once, so the next slave goes to whoever is lowest now, and within one round
no framework is offered the same slave twice.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from master.quota import Quota, ancestors_or_self, cap_offer, gap
from master.roles import TREE_POLICIES, RoleTree, check_role
from master.sorter import Millis, Sorter, Total
from protocol.wire.messages import RoleView
from protocol.wire.resources import (
    CPUS,
    MEM,
    SCALE,
    Resources,
    add_millis,
    dominant_share,
    holds,
)

# Mesos offers a slave only if at least this much of cpus or mem is free: smaller crumbs
# would be offered and declined forever.
MIN_CPUS, MIN_MEM = int(0.01 * SCALE), 32 * SCALE


@dataclass(frozen=True, slots=True)
class Allocation:
    framework_id: str
    slave_id: str
    resources: Resources


@dataclass(slots=True)
class Filter:
    """Declined resources of one slave, refused until `expires` (Mesos's refuse_seconds).

    It holds only while what the slave has free is within what was declined: once more is
    free than was refused, the framework is offered it again.
    """

    expires: float
    resources: Resources


@dataclass(slots=True)
class Reservation:
    """Room held on a slave for one framework until `until` (preemption frees it for the
    framework that starved, so that nobody else snatches it first)."""

    framework_id: str
    resources: Millis
    until: float


@dataclass(slots=True)
class SlaveBook:
    slave_id: str
    hostname: str
    total: Resources
    attributes: dict[str, str] = field(default_factory=dict)
    allocated: Millis = field(default_factory=dict)  # offered or used, by anyone
    by_framework: dict[str, Millis] = field(default_factory=dict)
    unowned: Millis = field(default_factory=dict)  # used by frameworks we do not know (yet)
    active: bool = True  # off while its slave is disconnected: nothing of it is offered
    # total - allocated for every resource of the total (zeros kept), kept as `allocated`
    # changes: a round reads it for every slave it visits
    unallocated: Millis = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.unallocated = dict(self.total.millis)

    def free(self) -> Millis:
        return dict(self.unallocated)

    def take(self, delta: Mapping[str, int]) -> None:
        """`delta` is allocated here now (offered, or in use)."""
        add_millis(self.allocated, delta)
        free = self.unallocated
        for k, v in delta.items():
            if k in free:
                free[k] -= v


@dataclass(slots=True)
class FrameworkBook:
    framework_id: str
    role: str
    active: bool = True
    suppressed: bool = False
    filters: dict[str, Filter] = field(default_factory=dict)
    slaves: set[str] = field(default_factory=set)  # where it holds resources
    min_allocatable: list[Millis] = field(default_factory=list)  # offer only one of these


class AllocatorError(ValueError):
    """A call that does not fit the books (unknown framework or slave, double release)."""


HEADROOM = ("all", "demand")
"""Whose unmet guarantees are held back from everybody else's offers: every quota role's,
framework or not (`all`, Mesos's), or only those of roles whose frameworks want offers now
(`demand`: work-conserving, and preemption reclaims a guarantee when its role comes)."""


class Allocator:
    def __init__(
        self,
        policy: str = "drf",
        *,
        seed: int | None = None,
        shuffle: bool = True,
        quota_headroom: str = "all",
    ):
        if quota_headroom not in HEADROOM:
            raise AllocatorError(f"quota headroom {quota_headroom!r}: one of {', '.join(HEADROOM)}")
        self.quota_headroom = quota_headroom
        self.policy = policy
        self._total = Total()
        # roles in a tree (hdrf, naive-hdrf, flat), or side by side (drf, asset, cpu, fifo)
        self._roles: Sorter | RoleTree = (
            RoleTree(policy, self._total)
            if policy in TREE_POLICIES
            else Sorter(policy, self._total)
        )
        self._framework_policy = "drf" if policy in TREE_POLICIES else policy
        self._role_frameworks: dict[str, Sorter] = {}
        self._role_weights: dict[str, float] = {}
        self.frameworks: dict[str, FrameworkBook] = {}
        self.slaves: dict[str, SlaveBook] = {}
        self._rng = random.Random(seed)
        self._shuffle = shuffle
        self.quotas: dict[str, Quota] = {}  # by role node (on a tree, pools too)
        self._allocated: Millis = {}  # the whole cluster's, offered or in use
        self.dirty: set[str] = set()  # slaves that may have something new to offer
        self._wake = False  # every slave may: someone new wants offers (see _wake_all)
        self._expiring: list[tuple[float, str]] = []  # (when, slave) filters, holds lapse
        self.reservations: dict[str, list[Reservation]] = {}  # by slave
        # the least each framework wanting offers can use (its offer filters, those no
        # other's undercuts): a slave holding none of them is of no use to anyone; None
        # while someone takes anything (see _floors)
        self._floor: list[Millis] | None = None
        self._floor_stale = True

    # -- frameworks --------------------------------------------------------------------------
    def add_framework(
        self,
        framework_id: str,
        role: str = "*",
        weight: float | None = None,
        *,
        active: bool = True,
    ) -> None:
        if framework_id in self.frameworks:
            raise AllocatorError(f"framework {framework_id} is already known")
        problem = self.role_problem(role)
        if problem:
            raise AllocatorError(problem)
        if role not in self._role_frameworks:
            self._role_frameworks[role] = Sorter(self._framework_policy, self._total)
            self._roles.add(role, self._role_weights.get(role, 1.0))
        if weight is not None and role not in self._role_weights:
            self._roles.update_weight(role, weight)
        self._role_frameworks[role].add(framework_id, active=active)
        self.frameworks[framework_id] = FrameworkBook(framework_id, role, active=active)
        self._sync(framework_id)

    def remove_framework(self, framework_id: str) -> None:
        """Forget a framework, releasing whatever it still holds on any slave."""
        fw = self._framework(framework_id)
        for slave_id in list(fw.slaves):
            slave = self.slaves[slave_id]
            held = slave.by_framework.get(framework_id)
            if held:
                self.recover(framework_id, slave_id, Resources.from_millis(held))
        sorter = self._role_frameworks[fw.role]
        sorter.remove(framework_id)
        if not len(sorter):
            del self._role_frameworks[fw.role]
            self._roles.remove(fw.role)
        else:
            self._sync_role(fw.role)
        del self.frameworks[framework_id]

    def set_min_allocatable(self, framework_id: str, minimum: list[Resources]) -> None:
        """Offer this framework a slave only if its free resources hold one of `minimum`
        (Mesos 1.10's offer_filters): no offers it can only decline."""
        fw = self._framework(framework_id)
        old, fw.min_allocatable = fw.min_allocatable, [dict(r.millis) for r in minimum]
        self._floor_stale = True
        # slaves it was not offered may suit it now, unless every new minimum still holds
        # one of the old (then nothing it skipped fits it any better)
        if not old or not all(any(_within(o, m) for o in old) for m in fw.min_allocatable):
            self._wake_all()

    def activate(self, framework_id: str) -> None:
        self._framework(framework_id).active = True
        self._sync(framework_id)

    def deactivate(self, framework_id: str) -> None:
        """A disconnected framework keeps its allocation but is offered nothing."""
        self._framework(framework_id).active = False
        self._sync(framework_id)

    def suppress(self, framework_id: str) -> None:
        """No offers until revive: the framework leaves the order (and costs no walk)."""
        self._framework(framework_id).suppressed = True
        self._sync(framework_id)

    def revive(self, framework_id: str) -> None:
        """Offers again, everywhere: clears the suppression and every filter."""
        fw = self._framework(framework_id)
        fw.suppressed = False
        fw.filters.clear()
        self._sync(framework_id)

    def _sync(self, framework_id: str) -> None:
        """Keep the sorters' active sets to the frameworks (and roles) that want offers."""
        self._floor_stale = True
        fw = self.frameworks[framework_id]
        sorter = self._role_frameworks[fw.role]
        if fw.active and not fw.suppressed:
            sorter.activate(framework_id)
            self._wake_all()
        else:
            sorter.deactivate(framework_id)
        self._sync_role(fw.role)

    def _sync_role(self, role: str) -> None:
        """A role is in the order while any of its frameworks is."""
        if self._role_frameworks[role].active_count:
            self._roles.activate(role)
        else:
            self._roles.deactivate(role)

    def _wake_all(self) -> None:
        """Someone new wants offers: every slave with free resources is worth a visit
        (the next round visits them all; a slave with nothing free is passed over there)."""
        self._wake = True

    def set_role_weight(self, role: str, weight: float) -> None:
        """Configure a role's weight (takes precedence over weights frameworks ask for); in
        a tree, any node's: `eng` as well as `eng/backend`."""
        if not weight > 0:
            raise AllocatorError(f"weight must be positive, got {weight}")
        problem = self.role_problem(role)
        if problem:
            raise AllocatorError(problem)
        self._role_weights[role] = weight
        if isinstance(self._roles, RoleTree):
            self._roles.set_weight(role, weight)
        elif role in self._roles:
            self._roles.update_weight(role, weight)

    def set_ordering(self, role: str, ordering: str) -> None:
        """How a pool orders its children: drf, fair (memory alone) or fifo (tree policies)."""
        if isinstance(self._roles, RoleTree):
            try:
                self._roles.set_ordering(role, ordering)
            except ValueError as e:
                raise AllocatorError(str(e)) from None
        elif ordering != "drf":
            raise AllocatorError(f"a per-pool ordering ({role}: {ordering}) needs a tree policy")

    def apply_roles(self, roles: Mapping[str, Any]) -> None:
        """Weights, orderings and quotas from a roles file (`master.roles_file`)."""
        for role, spec in roles.items():
            self.set_role_weight(role, spec.weight)
            if spec.ordering != "drf" or isinstance(self._roles, RoleTree):
                self.set_ordering(role, spec.ordering)
            if spec.quota is not None:
                self.set_quota(role, spec.quota.quota())
            else:
                self.remove_quota(role)

    def role_problem(self, role: str) -> str | None:
        """Why `role` cannot be a role under this policy (None if it can)."""
        if isinstance(self._roles, RoleTree):
            try:
                check_role(role)
            except ValueError as e:
                return str(e)
        return None

    # -- slaves ------------------------------------------------------------------------------
    def add_slave(
        self,
        slave_id: str,
        total: Resources,
        *,
        hostname: str = "",
        attributes: Mapping[str, str] | None = None,
        used: Mapping[str, Resources] | None = None,
    ) -> None:
        """Add a slave; `used` is what frameworks already run there (a re-registration)."""
        if slave_id in self.slaves:
            raise AllocatorError(f"slave {slave_id} is already known")
        self.slaves[slave_id] = SlaveBook(slave_id, hostname, total, dict(attributes or {}))
        self._total.add(total)
        self.dirty.add(slave_id)
        for framework_id, resources in (used or {}).items():
            self.allocate_existing(framework_id, slave_id, resources)

    def remove_slave(self, slave_id: str) -> None:
        slave = self._slave(slave_id)
        for framework_id, held in list(slave.by_framework.items()):
            self.recover(framework_id, slave_id, Resources.from_millis(held))
        self._total.remove(slave.total)
        del self.slaves[slave_id]
        self.dirty.discard(slave_id)

    def deactivate_slave(self, slave_id: str) -> None:
        """Offer nothing of this slave until it is activated again (it is disconnected,
        and its tasks may still run)."""
        self._slave(slave_id).active = False

    def activate_slave(self, slave_id: str) -> None:
        self._slave(slave_id).active = True
        self.dirty.add(slave_id)

    def allocate_existing(self, framework_id: str, slave_id: str, resources: Resources) -> None:
        """Record resources already in use (tasks found on a re-registering slave).

        A framework we do not know yet (the master restarted and it has not re-subscribed)
        still holds the slave's resources; `adopt` hands them over when it comes back.
        """
        slave = self._slave(slave_id)
        if framework_id in self.frameworks:
            self._give(framework_id, slave, resources)
        else:
            add_millis(slave.unowned, resources.millis)
            slave.take(resources.millis)
            add_millis(self._allocated, resources.millis)

    def adopt(self, framework_id: str, slave_id: str, resources: Resources) -> None:
        """Move resources from 'unowned' to a framework that has (re-)subscribed."""
        slave = self._slave(slave_id)
        _sub(slave.unowned, resources.millis, "unowned")
        self._credit(framework_id, slave, resources)  # (it stays allocated on the slave)

    # -- the round ---------------------------------------------------------------------------
    def allocate(
        self, now: float, slave_ids: list[str] | None = None, *, full: bool = False
    ) -> list[Allocation]:
        """One allocation round.

        By default it visits only the slaves that may have something new to offer: where
        resources were freed or added, where a decline filter has lapsed, and -- after a
        framework arrives, is revived or reconnects -- every slave with free resources. A
        slave left out would be offered to nobody, so this is the full round's result at
        a fraction of its cost. `full` visits every slave; `slave_ids` just those.
        """
        while self._expiring and self._expiring[0][0] <= now:
            self.dirty.add(heapq.heappop(self._expiring)[1])
        if slave_ids is not None:
            order = list(slave_ids)
            self.dirty.difference_update(order)
        elif full or self._wake:
            order = list(self.slaves) if full else sorted(self.slaves)
            self.dirty.clear()
            self._wake = False
        else:
            order = sorted(self.dirty)  # sorted: a set's order varies from run to run
            self.dirty.clear()
        allocations: list[Allocation] = []
        floors = self._floors()
        slaves, reservations = self.slaves, self.reservations
        for slave_id in order:
            slave = slaves.get(slave_id)
            if slave is None or not slave.active:
                continue
            free = slave.unallocated  # (read here; changed only by _give, below)
            if not _allocatable(free):
                continue
            held = self._live_reservations(slave_id, now) if reservations else None
            if held:
                picked = self._pick_reserved(slave_id, held, free)
            elif floors is not None and not _fits_one(free, floors):
                continue  # too little here for anyone's offer filter: no walk
            else:
                picked = self._pick(slave_id, free, now)
            if picked is None:
                continue
            framework_id, offer = picked
            resources = Resources.from_millis(offer)
            if offer != free:  # quota cut the offer: the rest is for others, next round
                self.dirty.add(slave_id)
            self._give(framework_id, slave, resources)
            allocations.append(Allocation(framework_id, slave_id, resources))
        return allocations

    def _floors(self) -> list[Millis] | None:
        """The offer filters of the frameworks wanting offers, less those another one's
        undercuts, when every one of them has offer filters (None when one takes
        anything): a slave holding none of them is of use to nobody, and is skipped."""
        if self._floor_stale:
            self._floor_stale = False
            wanting = [fw for fw in self.frameworks.values() if fw.active and not fw.suppressed]
            self._floor = None
            if all(fw.min_allocatable for fw in wanting):
                floors: list[Millis] = []
                for m in (m for fw in wanting for m in fw.min_allocatable):
                    if not any(holds(m, f) for f in floors):  # (nothing smaller is there)
                        floors = [f for f in floors if not holds(f, m)]
                        floors.append(m)
                self._floor = floors
        return self._floor

    def _pick(self, slave_id: str, free: Millis, now: float) -> tuple[str, Millis] | None:
        """The framework to offer this slave to, and what of it (all of it, unless quota
        limits or other roles' guarantees say less)."""
        frameworks = self.frameworks
        quotas = bool(self.quotas)
        if not quotas and isinstance(self._roles, Sorter):
            # side by side, no quota: the first framework in order that wants it gets all
            # of it (the sorters' own order read in place: this is the round's hot path)
            for _, _, role in self._roles.ordered():
                framework_id = self._first_wanting(role, slave_id, free, now)
                if framework_id is not None:
                    return framework_id, free
            return None
        if not quotas:
            # a tree, no quota: the tree walks the roles, each role's order is read in place
            found: dict[str, str] = {}  # (the tree may ask several roles: by role)

            def first_in_role(role: str) -> bool:
                framework_id = self._first_wanting(role, slave_id, free, now)
                if framework_id is not None:
                    found[role] = framework_id
                return framework_id is not None

            chosen = self._roles.first(first_in_role)
            return (found[chosen], free) if chosen is not None else None
        offer: dict[str, Millis] = {}  # what each role would be offered (made once a role)
        short = self._short_of_guarantee()
        stage = [bool(short)]  # in the quota stage (roles below their guarantee)

        def wants(framework_id: str) -> bool:
            fw = frameworks[framework_id]
            offerable = offer.get(fw.role)
            if offerable is None:
                offerable = offer[fw.role] = (
                    self._up_to_guarantee(fw.role, short, free)
                    if stage[0]
                    else self._offerable(fw.role, free)
                )
            if not _allocatable(offerable):
                return False
            return self._wants(fw, slave_id, offerable, now)

        picked: dict[str, str] = {}  # (the tree may ask several roles: by role)

        def role_wants(role: str) -> bool:
            framework_id = self._role_frameworks[role].first(wants)
            if framework_id is not None:
                picked[role] = framework_id
            return framework_id is not None

        if short:  # roles below their guarantee first (Mesos's quota stage), offered up
            # to what their guarantee still lacks whatever is held back for others
            guaranteed = self._roles.first(lambda r: self._under(r, short) and role_wants(r))
            if guaranteed is not None:
                return picked[guaranteed], offer[guaranteed]
            stage[0] = False
            offer.clear()
            picked.clear()
        chosen = self._roles.first(role_wants)
        if chosen is None:
            return None
        return picked[chosen], offer[chosen]

    def _first_wanting(self, role: str, slave_id: str, free: Millis, now: float) -> str | None:
        """The first framework of `role`, in its order, to be offered all of `free`."""
        frameworks = self.frameworks
        for _, _, framework_id in self._role_frameworks[role].ordered():
            if self._wants(frameworks[framework_id], slave_id, free, now):
                return framework_id
        return None

    @staticmethod
    def _wants(fw: FrameworkBook, slave_id: str, offerable: Millis, now: float) -> bool:
        """Whether `fw` is to be offered `offerable` of this slave: something it can use
        (its offer filters), and not what it declined here (its decline filter)."""
        if fw.min_allocatable and not _fits_one(offerable, fw.min_allocatable):
            return False  # nothing it can use here
        f = fw.filters.get(slave_id)
        if f is not None:
            if f.expires > now and _within(offerable, f.resources.millis):
                return False
            del fw.filters[slave_id]  # expired, or more is free than was refused
        return True

    # -- reservations --------------------------------------------------------------------------
    def reserve(self, slave_id: str, framework_id: str, resources: Resources, until: float) -> None:
        """Hold room for `resources` on a slave for one framework until `until`: while the
        hold lasts the slave is offered to nobody else, and to that framework once the room
        is free."""
        self._slave(slave_id)
        self._framework(framework_id)
        self.reservations.setdefault(slave_id, []).append(
            Reservation(framework_id, dict(resources.millis), until)
        )
        heapq.heappush(self._expiring, (until, slave_id))

    def unheld(self) -> dict[str, Millis]:
        """Every slave's free resources less what is held on it (what preemption may still
        plan with: a hold already belongs to someone)."""
        out: dict[str, Millis] = {}
        for slave_id, slave in self.slaves.items():
            room = slave.free()
            for hold in self.reservations.get(slave_id, []):
                for n, v in hold.resources.items():
                    room[n] = room.get(n, 0) - v
            out[slave_id] = room
        return out

    def _live_reservations(self, slave_id: str, now: float) -> list[Reservation]:
        holds = self.reservations.get(slave_id)
        if not holds:
            return []
        holds[:] = [r for r in holds if r.until > now and r.framework_id in self.frameworks]
        if not holds:
            del self.reservations[slave_id]
        return holds

    def _pick_reserved(
        self, slave_id: str, holds: list[Reservation], free: Millis
    ) -> tuple[str, Millis] | None:
        """The first framework whose held room is free is offered just that room (all of
        its holds here that fit), and the holds are used up; the rest of the slave waits
        for the other holds on it."""
        for first in holds:
            fw = self.frameworks[first.framework_id]
            if not fw.active or fw.suppressed:
                continue
            left = self._offerable(fw.role, free) if self.quotas else dict(free)
            offer: Millis = {}
            for hold in [h for h in holds if h.framework_id == first.framework_id]:
                if all(left.get(n, 0) >= v for n, v in hold.resources.items()):
                    holds.remove(hold)
                    add_millis(offer, hold.resources)
                    for n, v in hold.resources.items():
                        left[n] -= v
            if offer:
                if not holds:
                    del self.reservations[slave_id]
                fw.filters.pop(slave_id, None)  # it was freed for this framework
                return first.framework_id, offer
        return None

    # -- quota -------------------------------------------------------------------------------
    def set_quota(self, role: str, quota: Quota) -> None:
        problem = self.role_problem(role)
        if problem:
            raise AllocatorError(problem)
        self.quotas[role] = quota
        self._wake_all()

    def remove_quota(self, role: str) -> None:
        if self.quotas.pop(role, None) is not None:
            self._wake_all()

    def held_by_role(self, role: str) -> Millis:
        """What a role node holds (on a tree: its whole subtree), offered or in use."""
        if isinstance(self._roles, RoleTree):
            node = self._roles.nodes.get(role)
            return dict(node.allocation) if node is not None else {}
        return dict(self._roles.allocation(role).millis) if role in self._roles else {}

    def unsatisfiable(self) -> dict[str, str]:
        """Guarantees the cluster cannot meet, and why (reported, not refused)."""
        total = self._total.millis
        out = {}
        for role, quota in self.quotas.items():
            over = [n for n, v in quota.guarantee.millis.items() if v > total.get(n, 0)]
            if over:
                out[role] = f"guarantees more {', '.join(over)} than the cluster has"
        return out

    def is_tree(self) -> bool:
        return isinstance(self._roles, RoleTree)

    def _has_demand(self, role: str) -> bool:
        if isinstance(self._roles, RoleTree):
            node = self._roles.nodes.get(role)
            return node is not None and node.wanting > 0
        sorter = self._role_frameworks.get(role)
        return sorter is not None and sorter.active_count > 0

    def _short_of_guarantee(self) -> set[str]:
        """Role nodes with demand whose guarantee is not met yet (and still can be)."""
        return {role for role in self.quotas if self._has_demand(role) and self._lack(role)}

    def _lack(self, role: str) -> Millis:
        """What `role`'s guarantee still lacks that it could still get: the gap, cut down
        by the room left under every limit on its path (a guarantee a limit above it
        makes unreachable holds nothing back from anyone)."""
        lack = gap(self.quotas[role], self.held_by_role(role))
        for node in ancestors_or_self(role, self.is_tree()):
            quota = self.quotas.get(node)
            if quota is None or quota.limit is None:
                continue
            held = self.held_by_role(node)
            for name, amount in quota.limit.millis.items():
                if name in lack:
                    lack[name] = min(lack[name], max(0, amount - held.get(name, 0)))
        return {k: v for k, v in lack.items() if v > 0}

    def _up_to_guarantee(self, role: str, short: set[str], free: Millis) -> Millis:
        """An offer in the quota stage. Of the resources the role still lacks, up to its
        unmet guarantee (the smallest gap among the short nodes on its path), under its
        limits only: a guarantee is given unconditionally, as in Mesos, even when the
        cluster is overcommitted by guarantees, so others' headroom does not cut it. The
        other resources of the slave come along, as a task needs them too, under its
        limits and leaving others' headroom alone."""
        offerable = self._offerable(role, free)
        lacks: Millis = {}
        for node in ancestors_or_self(role, self.is_tree()):
            if node in short:
                for name, lack in self._lack(node).items():
                    lacks[name] = min(lacks.get(name, lack), lack)
        if not lacks:
            return offerable
        limited = self._offerable(role, free, headroom=False)
        out = dict(offerable)
        for name, lack in lacks.items():
            if name in limited:
                out[name] = min(limited[name], lack)
        out = {k: v for k, v in out.items() if v > 0}
        if _allocatable(out):
            return out
        # too little of it for an offer: what the role may have of the slave, if more
        for name, amount in out.items():
            offerable[name] = max(amount, offerable.get(name, 0))
        return offerable

    def _under(self, role: str, short: set[str]) -> bool:
        return any(node in short for node in ancestors_or_self(role, self.is_tree()))

    def _offerable(self, role: str, free: Millis, *, headroom: bool = True) -> Millis:
        """What of `free` may go to a framework of `role`: under every limit on its path,
        and (with `headroom`) leaving alone what other roles' unmet guarantees need."""
        mine = set(ancestors_or_self(role, self.is_tree()))
        limits = [
            (q.limit, self.held_by_role(node))
            for node in mine
            if (q := self.quotas.get(node)) is not None and q.limit is not None
        ]
        if not headroom:
            return cap_offer(free, limits, {}, {})
        unreserved = {k: v - self._allocated.get(k, 0) for k, v in self._total.millis.items()}
        return cap_offer(free, limits, self._headroom(mine), unreserved)

    def _holds_headroom(self, node: str) -> bool:
        """Whether `node`'s unmet guarantee is held back from others: always (`all`, as
        Mesos), or while its frameworks want offers (`demand`)."""
        quota = self.quotas.get(node)
        if quota is None or not quota.guarantee:
            return False
        return self.quota_headroom == "all" or self._has_demand(node)

    def _headroom(self, mine: set[str]) -> Millis:
        """The unmet guarantees of the role nodes outside `mine` (a role's own path): what
        offers to `mine` must leave unallocated. On a tree, a guarantee inside another
        held one is part of it, and counts once, at the top (as Mesos counts top-level
        roles' guarantees)."""
        need: Millis = {}
        tree = self.is_tree()
        for node in self.quotas:
            if node in mine or not self._holds_headroom(node):
                continue
            above = ancestors_or_self(node, tree)[:-1]
            if any(a not in mine and self._holds_headroom(a) for a in above):
                continue  # counted in its ancestor's
            add_millis(need, self._lack(node))
        return need

    def recover(
        self,
        framework_id: str,
        slave_id: str,
        resources: Resources,
        *,
        refuse_seconds: float | None = None,
        now: float = 0.0,
    ) -> None:
        """Resources come back from a framework (declined, unused, or a task ended).

        With `refuse_seconds`, the framework is not offered them on that slave again for
        that long (a decline filter).
        """
        slave = self._slave(slave_id)
        fw = self.frameworks.get(framework_id)
        held = slave.by_framework.get(framework_id)
        if held is None or fw is None:
            raise AllocatorError(f"framework {framework_id} holds nothing on slave {slave_id}")
        delta = resources.millis
        if not holds(held, delta):
            raise AllocatorError(
                f"framework {framework_id} on slave {slave_id} holds less than is being released"
            )
        # what a framework held is in the slave's and the cluster's allocation too (those
        # two keep their zeros: nothing asks them which resources they name)
        on_slave, free, everywhere = slave.allocated, slave.unallocated, self._allocated
        for k, v in delta.items():  # (one loop for the four books: once per task ending)
            left = held[k] - v
            if left:
                held[k] = left
            else:
                del held[k]
            on_slave[k] -= v
            everywhere[k] -= v
            if k in free:
                free[k] += v
        if not held:
            del slave.by_framework[framework_id]
            fw.slaves.discard(slave_id)
        self._role_frameworks[fw.role].unallocated(framework_id, resources)
        self._roles.unallocated(fw.role, resources)
        # worth a visit in the next round only if someone could use what is free now: a
        # smaller minimum, or a new framework, wakes every slave (and a hold is visited)
        floors = self._floors()
        if floors is None or _fits_one(slave.unallocated, floors) or slave_id in self.reservations:
            self.dirty.add(slave_id)
        if refuse_seconds:
            fw.filters[slave_id] = Filter(now + refuse_seconds, resources)
            heapq.heappush(self._expiring, (now + refuse_seconds, slave_id))

    def _give(self, framework_id: str, slave: SlaveBook, resources: Resources) -> None:
        slave.take(resources.millis)
        add_millis(self._allocated, resources.millis)
        self._credit(framework_id, slave, resources)

    def _credit(self, framework_id: str, slave: SlaveBook, resources: Resources) -> None:
        """Resources allocated on a slave are the framework's (given to it, or adopted)."""
        fw = self._framework(framework_id)
        add_millis(slave.by_framework.setdefault(framework_id, {}), resources.millis)
        fw.slaves.add(slave.slave_id)
        self._role_frameworks[fw.role].allocated(framework_id, resources)
        self._roles.allocated(fw.role, resources)

    # -- views -------------------------------------------------------------------------------
    @property
    def total(self) -> Resources:
        return self._total.resources

    def allocation(self, framework_id: str) -> Resources:
        fw = self._framework(framework_id)
        return self._role_frameworks[fw.role].allocation(framework_id)

    def dominant_share(self, framework_id: str) -> float:
        """The framework's own dominant share of the cluster (unweighted)."""
        return self.allocation(framework_id).dominant_share(self.total)

    def role_share(self, role: str) -> float:
        """The role's share as the order sees it (policy share / weight, or / promise)."""
        if isinstance(self._roles, RoleTree):
            return self._roles.ordering_share(role)
        return self._roles.share(role)

    def role_promise(self, role: str) -> float | None:
        """What a tree policy promises the frameworks of `role` (None for flat policies)."""
        return self._roles.own_promise(role) if isinstance(self._roles, RoleTree) else None

    def role_views(self) -> list[RoleView]:
        """Every role and pool (and every role with a quota or a configured weight): weight,
        share, promise, quota."""
        names = set(self.quotas) | set(self._role_weights)
        if isinstance(self._roles, RoleTree):
            names |= {path for path in self._roles.nodes if path}
        else:
            names |= set(self._role_frameworks)
        total = self._total.millis
        unsatisfiable = self.unsatisfiable()
        views = []
        for role in sorted(names):
            quota = self.quotas.get(role)
            views.append(
                RoleView(
                    role=role,
                    weight=self.role_weight(role),
                    share=dominant_share(self.held_by_role(role), total),
                    promise=self._roles.promise(role)
                    if isinstance(self._roles, RoleTree) and role in self._roles.nodes
                    else None,
                    guarantee=quota.guarantee if quota and quota.guarantee else None,
                    limit=quota.limit if quota else None,
                    unsatisfiable=unsatisfiable.get(role, ""),
                )
            )
        return views

    def role_weight(self, role: str) -> float:
        """A role's weight: configured, else 1 (a role nobody is in yet has one too)."""
        if isinstance(self._roles, Sorter) and role not in self._roles:
            return self._role_weights.get(role, 1.0)
        return self._roles.weight(role)

    def pool_weights(self) -> dict[str, float]:
        """Every role node's weight (on a tree, pools too)."""
        if isinstance(self._roles, RoleTree):
            return {path: node.weight for path, node in self._roles.nodes.items() if path}
        return {role: self._roles.weight(role) for role in self._role_frameworks}

    def framework_weight(self, framework_id: str) -> float:
        """A framework's weight as the ideal sees it: under flat policies it shares its
        role's weight with the role's other frameworks; on a tree the pools carry it."""
        fw = self._framework(framework_id)
        if isinstance(self._roles, RoleTree):
            return 1.0
        return self._roles.weight(fw.role) / max(1, len(self._role_frameworks[fw.role]))

    def held(self, framework_id: str, slave_id: str) -> Resources:
        slave = self._slave(slave_id)
        return Resources.from_millis(slave.by_framework.get(framework_id, {}))

    def held_on(self, slave_id: str) -> Resources:
        """Everything allocated on a slave (offered or in use, by anyone)."""
        return Resources.from_millis(self._slave(slave_id).allocated)

    def free(self, slave_id: str) -> Resources:
        return Resources.from_millis(self._slave(slave_id).free())

    def allocated_total(self) -> Resources:
        total: Millis = {}
        for slave in self.slaves.values():
            add_millis(total, slave.allocated)
        return Resources.from_millis(total)

    def order(self) -> Iterator[str]:
        """Active frameworks in the order they would be offered resources."""
        for role in self._roles.sort():
            yield from self._role_frameworks[role].sort()

    # -- helpers -----------------------------------------------------------------------------
    def _framework(self, framework_id: str) -> FrameworkBook:
        try:
            return self.frameworks[framework_id]
        except KeyError:
            raise AllocatorError(f"unknown framework {framework_id}") from None

    def _slave(self, slave_id: str) -> SlaveBook:
        try:
            return self.slaves[slave_id]
        except KeyError:
            raise AllocatorError(f"unknown slave {slave_id}") from None


def _allocatable(free: Mapping[str, int]) -> bool:
    # (no generators here: a round asks this of every slave it visits)
    if free.get(CPUS, 0) >= MIN_CPUS or free.get(MEM, 0) >= MIN_MEM:
        return True
    # a slave with neither cpus nor mem (custom resources only) is offered whatever it has
    return CPUS not in free and MEM not in free and any(v > 0 for v in free.values())


def _fits_one(free: Millis, floors: list[Millis]) -> bool:
    for floor in floors:  # (a plain loop, holds inlined: asked of every slave visited)
        for name, amount in floor.items():
            if free.get(name, 0) < amount:
                break
        else:
            return True
    return False


def _within(free: Millis, refused: Mapping[str, int]) -> bool:
    return all(refused.get(k, 0) >= v for k, v in free.items() if v > 0)


def _sub(into: Millis, delta: Mapping[str, int], what: str) -> None:
    for k, v in delta.items():
        if into.get(k, 0) < v:
            raise AllocatorError(f"{what} holds less {k} than is being released")
    for k, v in delta.items():
        left = into[k] - v
        if left:
            into[k] = left
        else:
            del into[k]
