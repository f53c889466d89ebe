"""The allocation module: who is offered which slave's free resources, and when.

Free of I/O and of wall-clock time (callers pass `now`), so the master, the simulator and
the benchmarks all drive the very same code.

The books (`ledger`): every slave's total and what is allocated on it (offered or in use)
per framework; every framework's role, filters and whether it wants offers. The order: a
`RoleOrder` of roles (weights belong to roles, as in Mesos: a flat `Sorter`, or a
`RoleTree`) and, inside each role, a sorter of its frameworks -- with one framework per
role this is plain weighted DRF. The roles' weights, orderings and quotas:
`role_settings`; quotas in a round: `quota_stage`.

An allocation round (`allocate`) walks the slaves in the order of their ids and gives each
slave's whole free resources to the first framework, lowest share first, that wants offers:
active, not suppressed, and not filtered for that slave. The offered resources count as
allocated at once, so the next slave goes to whoever is lowest now, and within one round
no framework is offered the same slave twice.

Unlike Mesos, a round does not shuffle the slaves: in the ids' order, the master, the
simulator and the tests make the same decisions from the same books, with no seed. Ties
between frameworks are broken by the sorters (fewest allocations first), so fairness does
not depend on the slaves' order, only which slaves go first when more are free than wanted.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from functools import partial

from master.allocation.clients import Clients
from master.allocation.collector import PausedCollector
from master.allocation.holds import Holds
from master.allocation.hopeless import Largest, fits_nowhere
from master.allocation.ledger import (
    Again,
    Allocation,
    AllocatorError,
    AtOnce,
    FrameworkBook,
    Lapse,
    Refused,
    SlaveBook,
    anything,
    first_wanting,
    fits_one,
    floors_of,
    least_of,
    master_floor,
    within,
)
from master.allocation.offer_room import RETRY as ROOM_RETRY
from master.allocation.offer_room import OfferRoom
from master.allocation.out_of_offers import OutOfOffers
from master.allocation.quota_stage import QuotaStage, RoleStanding, quota_pick
from master.allocation.refusing import PASSES, Refusing
from master.allocation.reserved import (
    IdleReservations,
    ReservedPick,
    convert_total,
    left_over,
    replace_free,
    reserved_pick,
    reserved_roles,
    visible,
)
from master.allocation.role_order import RoleOrder
from master.allocation.role_settings import RoleSettings
from master.allocation.role_tree import TREE_POLICIES, RoleTree
from master.allocation.shared import NOTHING, Copies, Split
from master.allocation.sorter import Millis, Sorter, Total
from master.allocation.visits import Visits
from protocol.wire.reservations import shared_keys, stripped
from protocol.wire.resources import (
    ResourceError,
    Resources,
    add_millis,
    holds,
    sub_millis,
)

Roles = Sequence[str] | None  # a multi-role framework's (None: one role)

__all__ = ["HEADROOM", "Allocation", "Allocator", "AllocatorError", "RoleStanding"]

HEADROOM = ("all", "demand")
"""Whose unmet guarantees are held back from everybody else's offers: every quota role's,
framework or not (`all`, Mesos's), or only those of roles whose frameworks want offers now
(`demand`: work-conserving, and preemption reclaims a guarantee when its role comes)."""


class Allocator:
    def __init__(
        self,
        policy: str = "drf",
        *,
        quota_headroom: str = "all",
        min_allocatable: list[Resources] | None = None,
    ) -> None:
        """`min_allocatable`: the master's minimum offer (Mesos's
        --min_allocatable_resources): free resources are offered only if they hold one of
        these; None is Mesos's default (cpus 0.01 or mem 32), [] anything. A framework's
        own offer filters replace it for that framework."""
        if quota_headroom not in HEADROOM:
            raise AllocatorError(f"quota headroom {quota_headroom!r}: one of {', '.join(HEADROOM)}")
        self.quota_headroom = quota_headroom
        self.policy = policy
        self._total = Total()
        # roles in a tree (hdrf, naive-hdrf, flat), or side by side (drf, asset, cpu, fifo)
        tree = policy in TREE_POLICIES
        self._role_order: RoleOrder = (
            RoleTree(policy, self._total) if tree else Sorter(policy, self._total)
        )
        self._framework_policy = "drf" if tree else policy
        self._role_frameworks: dict[str, Sorter] = {}
        # each client's arrival: frameworks numbered as they come (a multi-role one's
        # clients share its number); a role's earliest orders it in a fifo pool
        self._arrivals: dict[str, int] = {}
        self._next_arrival = 0
        # role: slave: what a removed framework's tasks hold there while they die, counted
        # in the role's share (hold_unowned's `role`); a role stays in the order for it
        self._charged: dict[str, dict[str, Millis]] = {}
        self.frameworks: dict[str, FrameworkBook] = {}  # by client (`clients`)
        self.clients = Clients()  # a multi-role framework's, one a role
        self._wanting: dict[str, FrameworkBook] = {}  # active and not suppressed
        self.slaves: dict[str, SlaveBook] = {}
        self._allocated: Millis = {}  # the whole cluster's, offered or in use
        # what is reserved for each role and not allocated (counted as the role's quota)
        self._idle = IdleReservations(self.slaves.values)
        self._copies = Copies(tree)  # of shared volumes, by holder and role (`shared`)
        self._quota = QuotaStage(
            self._role_order, self._total.millis, self._allocated, quota_headroom, self._idle
        )
        self._holds = Holds()
        self._visits = Visits(self.frameworks, self._holds)  # which slaves a round visits
        # weights, orderings and quotas (a setting asks every slave to be visited again)
        self.roles = RoleSettings(self._role_order, self._quota, self._settings_changed)
        self.quotas = self.roles.quotas  # by role node (on a tree, pools too)
        self.reservations = self._holds.by_slave  # by slave
        self._refusing = Refusing(
            self._wanting, self._visits, self.quotas, self.reservations, self.slaves
        )
        self._lone = self._refusing.lone  # (slaves all refuse, or all but one: `lone`)
        # the least each framework wanting offers can use (see _floors); None while one
        # takes anything
        self._floor: list[Millis] | None = None
        self._floor_stale = True
        self._floors_positive = False
        self._largest = Largest()  # of the slaves' totals: whose filters fit none
        self._away = OutOfOffers(self.slaves)  # slaves out of the offers
        self._least = ("", 0, "", 0)  # what every one of those asks at least (`least_of`)
        self.min_allocatable = min_allocatable
        self._master_floor = master_floor(
            None if min_allocatable is None else [dict(r.millis) for r in min_allocatable if r]
        )
        self._own_floors = 0  # frameworks with offer filters of their own

    # -- frameworks --------------------------------------------------------------------------
    def add_framework(
        self, framework_id: str, role: str = "*", *, active: bool = True, roles: Roles = None
    ) -> None:
        """A framework in `role` (its weight is the role's: set_role_weight); with
        `roles`, a multi-role framework, a client in each of them (`clients`)."""
        if framework_id in self.frameworks or self.clients.multi_role(framework_id):
            raise AllocatorError(f"framework {framework_id} is already known")
        problem = next(filter(None, map(self.roles.problem, roles or [role])), None)
        if problem:
            raise AllocatorError(problem)
        clients = self.clients.add(framework_id, roles) if roles else {role: framework_id}
        arrival, self._next_arrival = self._next_arrival, self._next_arrival + 1
        for each, client in clients.items():
            self._add_client(client, each, active, arrival)

    def _add_client(self, framework_id: str, role: str, active: bool, arrival: int) -> None:
        if role not in self._role_frameworks:
            self._role_frameworks[role] = Sorter(self._framework_policy, self._total)
            if role not in self._role_order:  # (else kept for what dying tasks hold)
                self._role_order.add(role)
        self._role_frameworks[role].add(framework_id, active=active)
        self._role_frameworks[role].set_arrival(framework_id, arrival)  # (fifo: `_queue`)
        self._arrivals[framework_id] = arrival
        self._role_arrival(role)
        self.frameworks[framework_id] = FrameworkBook(framework_id, role, active=active)
        self._sync(framework_id)

    def _role_arrival(self, role: str) -> None:
        """A role's place among a fifo pool's children: its earliest framework's arrival
        (its sorter's first client: they are added as they come), none when it has none."""
        first = self._role_frameworks[role].first_added()
        self._role_order.set_arrival(role, None if first is None else self._arrivals[first])

    def remove_framework(self, framework_id: str) -> None:
        """Forget a framework, releasing whatever it still holds on any slave."""
        for client in self.clients.of(framework_id):
            self._remove_client(client)
        self.clients.remove(framework_id)

    def _remove_client(self, framework_id: str) -> None:
        fw = self._framework(framework_id)
        for slave_id in list(fw.slaves):
            slave = self.slaves[slave_id]
            held = slave.by_framework.get(framework_id)
            if held:
                self.recover(framework_id, slave_id, Resources.from_millis(held))
        sorter = self._role_frameworks[fw.role]
        sorter.remove(framework_id)
        del self._arrivals[framework_id]
        self._role_arrival(fw.role)
        if not len(sorter):
            del self._role_frameworks[fw.role]
            if fw.role in self._charged:  # (its share still counts dying tasks)
                self._role_order.deactivate(fw.role)
            else:
                self._role_order.remove(fw.role)
        else:
            self._sync_role(fw.role)
        del self.frameworks[framework_id]
        if self._wanting.pop(framework_id, None) is not None:
            self._refusing.wanting(fw, False)  # (the others' refusals stand)
        self._own_floors -= fw.min_allocatable is not None
        self._floor_stale = True

    def set_roles(self, framework_id: str, roles: Sequence[str]) -> None:
        """A multi-role framework's roles are `roles` now (Mesos's UPDATE_FRAMEWORK): a
        client in each new one, as if it had been from the start (its arrival kept), and
        out of each it left, which must hold nothing (offered or used): AllocatorError,
        and nothing changed, if one does, or if a new one is not a role here."""
        old = self.clients.roles(framework_id)
        if old is None:
            raise AllocatorError(f"framework {framework_id} has one role: it keeps it")
        problem = next(filter(None, map(self.roles.problem, roles)), None)
        if problem:
            raise AllocatorError(problem)
        leaving = [self.clients.one(framework_id, role) for role in old if role not in roles]
        for client in leaving:
            if self.frameworks[client].slaves:
                role = self.frameworks[client].role
                raise AllocatorError(
                    f"framework {framework_id} holds resources in role {role}: what its "
                    "tasks and executors there hold must go back first"
                )
        first = self.frameworks[self.clients.first(framework_id)]
        active, arrival = first.active, self._arrivals[first.framework_id]
        for client in leaving:
            self._remove_client(client)
        for role, client in self.clients.replace(framework_id, roles).items():
            self._add_client(client, role, active, arrival)

    def set_min_allocatable(
        self, framework_id: str, minimum: list[Resources] | None, roles: Sequence[str] = ()
    ) -> None:
        """Offer this framework a slave only if its free resources hold one of `minimum`
        (Mesos 1.10's offer_filters): no offers it can only decline. They replace the
        master's minimum for it: [] is anything, None the master's minimum again. A
        multi-role framework's in `roles` (none: in every role), as Mesos keeps them by
        role."""
        new = None if minimum is None else [dict(r.millis) for r in minimum if r]
        # (who refuses which slave stands: a minimum is asked of the one a round names)
        self._largest.changed = True  # (asked again before the next round: `hopeless`)
        for fw in self._books(framework_id, roles):
            old, fw.min_allocatable = fw.min_allocatable, new
            self._own_floors += (new is not None) - (old is not None)
            self._floor_stale = True
            # slaves it was not offered may suit it now, unless every new minimum still
            # holds one of the old (then nothing it skipped fits it any better)
            if not old or not new or not all(any(within(o, m) for o in old) for m in new):
                self._visits.wake_all()

    def take_shared(self, framework_id: str, on: bool = True) -> None:
        """Offer this framework shared volumes (its SHARED_RESOURCES capability), or no
        longer (Mesos offers them only to frameworks that declared it)."""
        for fw in self._books(framework_id):
            fw.shared = on
        self._visits.wake_all()

    def activate(self, framework_id: str) -> None:
        for fw in self._books(framework_id):
            fw.active = True
            self._sync(fw.framework_id)

    def deactivate(self, framework_id: str) -> None:
        """A disconnected framework keeps its allocation but is offered nothing, and its
        decline filters go, as Mesos's `deactivateFramework` clears them: the scheduler
        that subscribes again (a new process, which declined nothing) is offered every
        slave at once, not after its predecessor's refuse_seconds."""
        for fw in self._books(framework_id):
            fw.active = False
            fw.filters.clear()
            self._sync(fw.framework_id)

    def suppress(self, framework_id: str, roles: Sequence[str] = ()) -> None:
        """No offers until revive: the framework leaves the order (and costs no walk); a
        multi-role one in `roles` only (none: in every role, as Mesos's SUPPRESS)."""
        for fw in self._books(framework_id, roles):
            fw.suppressed = True
            self._sync(fw.framework_id)

    def revive(
        self, framework_id: str, roles: Sequence[str] = (), keep_until: float | None = None
    ) -> None:
        """Offers again, everywhere: clears the suppression and every filter (a multi-role
        framework's in `roles` only; none: in every role), but those that lapse by
        `keep_until` (a decline's floor of one interval: else a Decline of 0 and a Revive
        would have the declined room offered straight back to the decliner)."""
        for fw in self._books(framework_id, roles):
            fw.suppressed = False
            if keep_until is None:
                fw.filters.clear()
            else:
                for slave_id in [s for s, f in fw.filters.items() if f.expires > keep_until]:
                    del fw.filters[slave_id]
            self._sync(fw.framework_id)

    def suppressed(self, framework_id: str, role: str | None = None) -> bool:
        """Whether it suppressed its offers (and has not revived them): a multi-role
        framework in `role`, or (None) in every role."""
        if role is None and (fw := self.frameworks.get(framework_id)) is not None:
            return fw.suppressed  # (the usual: a framework of one role is its one client)
        clients = self.clients.of(framework_id, [role] if role is not None else ())
        return all(self._framework(client).suppressed for client in clients)

    def _sync(self, framework_id: str) -> None:
        """Keep the sorters' active sets to the frameworks (and roles) that want offers;
        and who refuses each slave (`lone`) to them: a framework wanting offers (or its
        filters cleared) joins it, one no longer wanting them leaves it."""
        self._floor_stale = True
        fw = self.frameworks[framework_id]
        wanting = fw.wants_offers
        self._place(framework_id, fw.role, wanting)
        if wanting:
            already = framework_id in self._wanting
            self._wanting[framework_id] = fw
            self._refusing.wanting(fw, True, already)
            self._visits.wake_all()
        elif self._wanting.pop(framework_id, None) is not None:
            self._refusing.wanting(fw, False)

    def _settings_changed(self) -> None:
        """A weight, ordering or quota changed: every slave is worth a visit, and a round
        picks anew (a quota's round picks otherwise: `quota_pick`)."""
        self._lone.clear()
        self._visits.wake_all()

    def _place(self, framework_id: str, role: str, in_order: bool) -> None:
        """A framework into its role's order, or out of it (and its role with it)."""
        sorter = self._role_frameworks[role]
        (sorter.activate if in_order else sorter.deactivate)(framework_id)
        self._sync_role(role)

    def _sync_role(self, role: str) -> None:
        """A role is in the order while any of its frameworks is."""
        if self._role_frameworks[role].active_count:
            self._role_order.activate(role)
        else:
            self._role_order.deactivate(role)

    # -- slaves ------------------------------------------------------------------------------
    def add_slave(
        self,
        slave_id: str,
        total: Resources,
        *,
        used: Mapping[str, Resources] | None = None,
    ) -> None:
        """Add a slave; `used` is what frameworks already run there (a re-registration)."""
        if slave_id in self.slaves:
            raise AllocatorError(f"slave {slave_id} is already known")
        slave = self.slaves[slave_id] = SlaveBook(slave_id, total)
        slave.reserved, slave.shared = reserved_roles(total.millis), shared_keys(total.millis)
        what = self._what(slave, total)
        self._total.add(what)
        self._largest.added(what.millis)
        self._idle.add(slave, total.millis, 1)
        self._visits.visit(slave_id)
        for framework_id, resources in (used or {}).items():
            self.allocate_existing(framework_id, slave_id, resources)

    def remove_slave(self, slave_id: str) -> None:
        slave = self._slave(slave_id)
        for framework_id, held in list(slave.by_framework.items()):
            self.recover(framework_id, slave_id, Resources.from_millis(held))
        for role in [r for r, on in self._charged.items() if slave_id in on]:  # (dying there)
            gone = Resources.from_millis(self._charged[role][slave_id])
            self._uncharge(role, slave_id, self._what(slave, gone), left={})
        self._idle.add(slave, slave.unallocated, -1)
        self._total.remove(self._what(slave, slave.total))
        self._largest.lost()
        del self.slaves[slave_id]
        self._set_away(slave_id, False)
        self._copies.forget(slave_id)
        self._lone.pop(slave_id, None)
        self._visits.forget(slave_id)

    def update_slave(self, slave_id: str, total: Resources) -> None:
        """The slave came back with another total (other `--resources`), as Mesos's
        `updateSlave`: what is allocated there stays, the rest is its free."""
        slave = self._slave(slave_id)
        free = slave.free_within(total)  # (AllocatorError first: nothing changed)
        self._idle.add(slave, slave.unallocated, -1)
        self._total.remove(self._what(slave, slave.total))
        slave.total, slave.reserved, slave.unallocated = total, reserved_roles(total.millis), free
        slave.shared = shared_keys(total.millis)
        self._total.add(self._what(slave, total))
        self._largest.lost()
        self._idle.add(slave, free, 1)
        self._lone.pop(slave_id, None)
        self._visits.visit(slave_id)

    def remove_filters(self, slave_id: str) -> None:
        """Forget every framework's decline of this slave: it came back with other
        attributes, which a framework may have declined it for (Mesos's `updateSlave`)."""
        slave = self._slave(slave_id)
        for fw in self.frameworks.values():
            fw.filters.pop(slave_id, None)
        slave.refused_by.clear()
        self._lone.pop(slave_id, None)
        self._visits.visit(slave_id)

    def deactivate_slave(self, slave_id: str) -> None:
        """Offer nothing of this slave until it is activated again (it is disconnected,
        and its tasks may still run)."""
        self._slave(slave_id).active = False
        self._set_away(slave_id, True)

    def _set_away(self, slave_id: str, away: bool) -> None:
        """The slave out of the offers (or back), and the quota stage told what that
        leaves free where nobody can be offered it."""
        if away == (slave_id in self._away.ids):
            return
        if away:
            self._away.ids.add(slave_id)
        else:
            self._away.ids.discard(slave_id)
        self._quota.out_of_offers = self._away.unreserved_free()

    def activate_slave(self, slave_id: str) -> None:
        self._slave(slave_id).active = True
        self._set_away(slave_id, False)
        self._visits.visit(slave_id)

    def allocate_existing(
        self, framework_id: str, slave_id: str, resources: Resources, role: str | None = None
    ) -> None:
        """Record resources already in use (tasks found on a re-registering slave), a
        multi-role framework's in `role`.

        A framework we do not know yet (the master restarted and it has not re-subscribed)
        still holds the slave's resources; `adopt` hands them over when it comes back.
        """
        if framework_id in self.frameworks or self.clients.multi_role(framework_id):
            self._give(self.clients.one(framework_id, role), self._slave(slave_id), resources)
        else:
            self.hold_unowned(slave_id, resources)

    def hold_unowned(self, slave_id: str, resources: Resources, role: str = "") -> None:
        """Record resources in use by tasks no framework here owns (yet): see `adopt`.
        With a `role`, they are a removed framework's tasks while they die: counted in
        that role's share until released, so that its principal's next framework is not
        first in the order for the room they still use (the role kept in the order,
        offered nothing, while it has no framework)."""
        slave = self._slave(slave_id)
        on_slave = self._copies.split(slave, "", None, resources.millis, 1)[0]  # (checks)
        add_millis(slave.unowned, resources.millis)
        self._take(slave, on_slave)
        if role:
            add_millis(
                self._charged.setdefault(role, {}).setdefault(slave_id, {}), resources.millis
            )
            if role not in self._role_order:
                self._role_order.add(role)
                self._role_order.deactivate(role)
            self._role_order.allocated(role, self._what(slave, resources))  # (as shares see it)

    def release_unowned(self, slave_id: str, resources: Resources, role: str = "") -> None:
        """Resources held by `hold_unowned` (for `role`) are free again: the tasks nobody
        here owned are shut down (their framework torn down by an operator)."""
        slave = self._slave(slave_id)
        charged = self._charged.get(role, {}).get(slave_id, {})
        try:  # (the role's first: what is charged to it is in the slave's unowned too)
            if role:
                sub_millis(charged, resources.millis, f"role {role} on {slave_id}")
            sub_millis(slave.unowned, resources.millis, f"slave {slave_id}'s unowned")
        except ResourceError as e:
            raise AllocatorError(str(e)) from None
        on_slave = self._copies.split(slave, "", None, resources.millis, -1)[0]
        self._free_again(slave, on_slave)
        if role:
            self._uncharge(role, slave_id, self._what(slave, resources), charged)
        self._lone.pop(slave_id, None)
        self._visits.visit(slave_id)

    def _uncharge(self, role: str, slave_id: str, resources: Resources, left: Millis) -> None:
        """`resources` of the role's dying tasks on the slave (as shares see them: `_what`)
        no longer count in its share; `left`: what is still charged to it there. A role
        with no framework and nothing else charged leaves the order."""
        on = self._charged[role]
        if not any(left.values()):
            del on[slave_id]
            if not on:
                del self._charged[role]
        self._role_order.unallocated(role, resources)
        if role not in self._role_frameworks and role not in self._charged:
            self._role_order.remove(role)

    def adopt(
        self, framework_id: str, slave_id: str, resources: Resources, role: str | None = None
    ) -> None:
        """Move resources from 'unowned' to a framework that has (re-)subscribed (a
        multi-role one's in `role`)."""
        slave = self._slave(slave_id)
        framework_id = self.clients.one(framework_id, role)
        self._framework(framework_id)  # (one it knows, else AllocatorError: _credit reads it)
        try:
            sub_millis(slave.unowned, resources.millis, f"slave {slave_id}'s unowned")
        except ResourceError as e:
            raise AllocatorError(str(e)) from None
        self._copies.split(slave, "", None, resources.millis, -1)  # (the slave keeps them)
        counted = self._copies.split(
            slave, framework_id, self.frameworks[framework_id].role, resources.millis, 1
        )
        self._credit(framework_id, slave, resources, counted)  # (it stays allocated)

    # -- the round ---------------------------------------------------------------------------
    def allocate(
        self,
        now: float,
        slave_ids: list[str] | None = None,
        *,
        full: bool = False,
        room: Mapping[str, int] | None = None,
        at_once: AtOnce | None = None,
    ) -> list[Allocation]:
        """One allocation round.

        By default it visits only the slaves that may have something new to offer: where
        resources were freed or added, where a decline filter has lapsed, and -- after a
        framework arrives, is revived or reconnects -- every slave with free resources. A
        slave left out would be offered to nobody, so this is the full round's result at
        a fraction of its cost. `full` visits every slave; `slave_ids` just those.
        `room`: how many more offers a framework may be given (`offer_room`).
        `at_once`: frameworks that answer each offer as the round makes it (`ledger.Answer`):
        one declined whole is never booked and counts nowhere, its framework refuses the
        slave for `declined_for` (the filter `recover` would set had it been booked and
        given back), and the slave is offered on down the order; of one used in part only
        what is used is booked, and its framework refuses the rest for `rest_for`, the
        rest offered to others by the next round (as `recover` would have it) -- where no
        quota or bound could tell (there every offer is booked whole, answered after).

        The garbage collector waits for the round's end (`PausedCollector`).
        """
        if self._largest.changed:
            self._ask_hopeless()
        if self.quotas and self._away:  # (unchanged through the round: none is offered)
            self._quota.out_of_offers = self._away.unreserved_free()
        with PausedCollector():
            if room:
                bound = OfferRoom(room, self._leave_round, self._rejoin_round)
                try:
                    return self._round(now, slave_ids, full, bound)
                finally:
                    bound.end()
            if at_once is None or self.quotas:
                return self._round(now, slave_ids, full, None)
            return self._round(now, slave_ids, full, None, at_once)

    def _ask_hopeless(self) -> None:
        """Frameworks whose offer filters fit no slave leave the order, and come back
        when one does (`hopeless`): asked when a slave came, left or changed, or a
        framework's filters did."""
        self._largest.changed = False
        most = self._largest.most(
            lambda: (self._what(s, s.total).millis for s in self.slaves.values())
        )
        for fw in list(self.frameworks.values()):
            hopeless = fits_nowhere(fw.min_allocatable, most)
            if hopeless != fw.hopeless:
                fw.hopeless = hopeless
                self._sync(fw.framework_id)

    def _leave_round(self, framework_id: str) -> bool:
        """A framework out of the order for the rest of a round (see `offer_room`)."""
        fw = self.frameworks.get(framework_id)
        if fw is None or not fw.wants_offers:
            return False
        self._place(framework_id, fw.role, False)
        return True

    def _rejoin_round(self, framework_id: str) -> None:
        fw = self.frameworks.get(framework_id)
        if fw is not None and fw.wants_offers:
            self._place(framework_id, fw.role, True)  # (no wake: it wanted offers all along)

    def _round(
        self,
        now: float,
        slave_ids: list[str] | None,
        full: bool,
        room: OfferRoom | None,
        at_once: AtOnce | None = None,
    ) -> list[Allocation]:
        order = self._visits.due(now, self.slaves, slave_ids, full)
        self._refusing.passes = PASSES  # (who refuses each slave: kept through as many)
        allocations: list[Allocation] = []
        floors = self._floors()
        slaves, reservations = self.slaves, self.reservations
        floor = self._master_floor
        # offer filters of their own replace the master's minimum: then a slave may be of
        # use with less, and each framework's own are asked (`ledger.can_use`)
        worth = anything if self._own_floors else floor
        # every framework wanting offers has offer filters (`floors`) and no slave is held:
        # holding one of the floors is the whole test (it implies `anything`), and the
        # master's minimum is nobody's
        floored = floors if self._floors_positive and not reservations else None
        k1, v1, k2, v2 = self._least
        books = (self._role_order, self._role_frameworks, self.frameworks, now, floor)
        if self.quotas:
            pick = quota_pick(self._quota, *books)
        else:
            # (a framework at its room leaves the order mid-round, which `lone` does not see)
            lone = self._lone if room is None else None
            answer = refused = again = None
            if at_once is not None:
                answer = at_once.answer  # (holds and reservations pick otherwise: booked)
                refused = self._refused_in_walk(now, at_once.declined_for)
                again = self._declined_again(now, at_once.declined_for)
            pick = first_wanting(
                *books,
                floored=floored is not None or worth is floor,
                lone=lone,
                answer=answer,
                refused=refused,
                again=again,
            )
        # (bound once: these run for every slave)
        give, offered, resources_of = self._give, allocations.append, Resources.from_millis
        multi = self.clients.owner
        mixed = None  # the pick for slaves holding reservations (made when one is met)
        answering = at_once is not None
        for slave_id in order:
            slave = slaves.get(slave_id)
            if slave is None or not slave.active:
                continue
            asked = answering  # (whether the framework picked answered already: `pick`)
            if slave.reserved:
                mixed = mixed or reserved_pick(*books[:4], floor, self._offerable)
                self._offer_reserved(slave, now, mixed, allocations, room)
                continue
            free = slave.unallocated  # (read here; changed only by _give, below)
            if floored is not None:
                if free.get(k1, 0) < v1 or free.get(k2, 0) < v2 or not fits_one(free, floored):
                    continue  # too little here for anyone's offer filter: no walk
                picked = pick(slave_id, free, now)
            elif not worth(free):
                continue
            elif reservations and (held := self._holds.live(slave_id, now, self.frameworks)):
                picked = self._holds.pick(slave_id, held, free, self.frameworks, self._offerable)
                asked = False
            elif floors is not None and not fits_one(free, floors):
                continue  # too little here for anyone's offer filter: no walk
            else:
                picked = pick(slave_id, free, now)
            if picked is None:
                if room is not None and room.out:  # a full framework might have taken it
                    self._visits.retry(now + ROOM_RETRY, slave_id)
                continue
            framework_id, offer = picked
            resources = resources_of(offer)
            # quota cut the offer, or its framework used it in part: the rest is for others,
            # next round
            rest = offer is not free and offer != free
            give(framework_id, slave, resources)
            if rest:
                self._visits.visit(slave_id)
                if asked:  # (it refuses what it left, as a decline of it would have it)
                    self._rest_refused(framework_id, slave_id, now, at_once)
            owner = multi.get(framework_id) if multi else None  # (a multi-role client)
            if owner is None:
                offered(Allocation(framework_id, slave_id, resources))
            else:
                offered(Allocation(owner[0], slave_id, resources, owner[1]))
            if room is not None:
                room.given(framework_id)
        return allocations

    def _rest_refused(
        self, framework_id: str, slave_id: str, now: float, at_once: AtOnce | None
    ) -> None:
        """A framework that used an offer in part (`ledger.Answer`) refuses what is left of
        the slave for `rest_for`, as `recover` with a filter would have it, had the whole
        offer been booked and the rest given back."""
        if at_once is not None and at_once.rest_for:
            free = self.slaves[slave_id].unallocated
            self._refusing.refused_in_walk(
                now + at_once.rest_for, now, [framework_id], slave_id, free, False
            )

    def _refused_in_walk(self, now: float, refuse_seconds: float | None) -> Refused:
        """What a round's walk does with those that declined a slave as it offered it to
        them (`ledger.first_wanting`): each refuses it for `refuse_seconds`
        (`Refusing.refused_in_walk` itself, its times bound); with no filter, a slave
        nobody took is offered again by the next round, as a slave given back is."""
        if refuse_seconds:
            return partial(self._refusing.refused_in_walk, now + refuse_seconds, now)
        visit = self._visits.visit

        def refused(
            decliners: list[str],
            slave_id: str,
            free: Millis,
            nobody: bool,
            everyone: bool,
            standing: list[Lapse],
        ) -> None:
            if nobody:
                visit(slave_id)

        return refused

    def _declined_again(self, now: float, refuse_seconds: float | None) -> Again | None:
        """Frameworks a slave's refusals name as lapsed declined it again (`ledger.Again`):
        each refuses it for `refuse_seconds` (without a filter, `_refused_in_walk`'s).
        `Refusing.declined_again` itself, its time bound (a partial: no frame of ours
        between, once a decline of a slave all the others refuse)."""
        if not refuse_seconds:
            return None
        return partial(self._refusing.declined_again, now + refuse_seconds)

    def _offer_reserved(
        self,
        slave: SlaveBook,
        now: float,
        pick: ReservedPick,
        allocations: list[Allocation],
        room: OfferRoom | None,
    ) -> None:
        """Offer a slave holding reservations: each framework in order what it may see of
        it (its role's reservations, and unreserved resources), until nobody wants what
        is left; a framework at most once. A preemption's hold on it is
        served first, with what its framework may see."""
        held = self._holds.live(slave.slave_id, now, self.frameworks) if self.reservations else None
        if held:
            picked = self._holds.pick(
                slave.slave_id,
                held,
                slave.unallocated,
                self.frameworks,
                lambda role, free: self._offerable_on(slave, role, free),
            )
            if picked is not None:
                held_offer = Resources.from_millis(picked[1])
                self._offer(slave, picked[0], held_offer, allocations, room)
            return
        given: set[str] = set()
        shown: set[str] = set()  # its shared volumes offered (to one framework a round)
        while (picked := pick(slave, given, shown)) is not None:
            framework_id, offer = picked  # (made for this offer alone: taken, not copied)
            self._offer(slave, framework_id, Resources.taking(offer), allocations, room)
            if not left_over(slave):
                return  # (the usual: one offer took it all, shared volumes aside)
            given.add(framework_id)
            if slave.shared:
                shown.update(slave.shared.intersection(offer))

    def _offer(
        self,
        slave: SlaveBook,
        framework_id: str,
        resources: Resources,
        allocations: list[Allocation],
        room: OfferRoom | None,
    ) -> None:
        self._give(framework_id, slave, resources)
        fid, role = self.clients.owner.get(framework_id, (framework_id, None))
        allocations.append(Allocation(fid, slave.slave_id, resources, role))
        if room is not None:
            room.given(framework_id)

    def _offerable_on(self, slave: SlaveBook, role: str, free: Millis) -> Millis:
        """What of a reserved slave's `free` a framework of `role` may be offered."""
        unreserved, mine = visible(slave, role, free)
        offer = self._offerable(role, unreserved) if unreserved else {}
        offer.update(mine)
        return offer

    def _floors(self) -> list[Millis] | None:
        """The offer filters of the frameworks wanting offers, less those another one's
        undercuts, when every one of them has offer filters (None when one takes
        anything): a slave holding none of them is of use to nobody, and is skipped."""
        if self._floor_stale:
            self._floor_stale = False
            self._floor = floors = floors_of(self.frameworks.values())
            # (each names some amount of something: holding one means something is free)
            self._floors_positive = floors is not None and all(
                amount > 0 for f in floors for amount in f.values()
            )
            self._least = least_of(floors) if floors else ("", 0, "", 0)
        return self._floor

    # -- reservations --------------------------------------------------------------------------
    def reserve(
        self,
        slave_id: str,
        framework_id: str,
        resources: Resources,
        until: float,
        role: str | None = None,
    ) -> None:
        """Hold room for `resources` on a slave for one framework until `until`: while the
        hold lasts the slave is offered to nobody else, and to that framework once the room
        is free -- a multi-role one's in `role` (None: its first)."""
        self._slave(slave_id)
        clients = self.clients
        framework_id = (
            clients.first(framework_id) if role is None else clients.one(framework_id, role)
        )
        self._framework(framework_id)
        self._holds.add(slave_id, framework_id, resources.millis, until)
        self._lone.pop(slave_id, None)  # (a hold's offer clears its framework's filter)
        self._visits.held(slave_id, until)

    # -- operations on resources (Mesos's updateAllocation, updateAvailable) ----------------
    def update_allocation(
        self,
        framework_id: str,
        slave_id: str,
        consumed: Resources,
        converted: Resources,
        role: str | None = None,
    ) -> None:
        """A framework turned `consumed` of what it holds on a slave into `converted`
        (RESERVE, UNRESERVE, CREATE, DESTROY: the same amounts, another owner or volume):
        they stay its (a multi-role one's in `role`), and the slave's total changes with
        them."""
        slave = self._slave(slave_id)
        framework_id = self.clients.one(framework_id, role)
        held = slave.by_framework.get(framework_id)
        if held is None or not holds(held, consumed.millis):
            raise AllocatorError(f"framework {framework_id} does not hold {consumed} there")
        if slave.shared or shared_keys(converted.millis):  # (checked first: `shared`)
            self._copies.check_conversion(slave, framework_id, consumed.millis, converted.millis)
        if stripped(consumed.millis) != stripped(converted.millis):
            # resources gone or come (Mesos's conversions may remove some): given back,
            # the total changed, and the new ones given
            self.recover(framework_id, slave_id, consumed)
            self._total.remove(self._what(slave, consumed))
            self._total.add(self._what(slave, converted))
            self._largest.lost()
            replace_free(slave, self._idle, consumed.millis, converted.millis)
            self._give(framework_id, slave, converted)
            return
        role = self.frameworks[framework_id].role
        self._copies.split(slave, framework_id, role, consumed.millis, -1)
        convert_total(slave, consumed.millis, converted.millis)
        sub_millis(held, consumed.millis)
        add_millis(held, converted.millis)
        self._copies.split(slave, framework_id, role, converted.millis, 1)

    def add_copies(
        self, framework_id: str, slave_id: str, copies: Resources, role: str | None = None
    ) -> None:
        """Tasks of one launch use shared volumes more often than they were offered them
        (Mesos's updateAllocation with additional copies): a copy more for each, the
        framework's (a multi-role one's in `role`) until its task ends."""
        slave = self._slave(slave_id)
        client = self.clients.one(framework_id, role)
        self._framework(client)
        if not slave.shared.issuperset(copies.millis):
            raise AllocatorError(f"{copies}: not shared volumes of slave {slave_id}")
        self._give(client, slave, copies)

    def update_available(self, slave_id: str, consumed: Resources, converted: Resources) -> None:
        """The operator turned `consumed` of a slave's free resources into `converted`
        (RESERVE_RESOURCES and the like): nobody holds them, and they are offered anew."""
        slave = self._slave(slave_id)
        if not holds(slave.unallocated, consumed.millis):
            raise AllocatorError(f"slave {slave_id} has not {consumed} free")
        if stripped(consumed.millis) != stripped(converted.millis):
            raise AllocatorError(f"{consumed} cannot become {converted}: not the same amounts")
        replace_free(slave, self._idle, consumed.millis, converted.millis)
        self._visits.visit(slave_id)

    def idle_reserved(self) -> Mapping[str, Millis]:
        """What is reserved for each role and not allocated (stripped), read in place."""
        return self._idle.by_role

    def unheld(self) -> dict[str, Millis]:
        """Every active slave's free resources less what is held on it (what preemption
        may still plan with: a hold already belongs to someone, and room on a slave out
        of the offers -- deactivated, draining, disconnected -- is offered to nobody)."""
        return {
            sid: self._holds.room(sid, slave.unallocated)
            for sid, slave in self.slaves.items()
            if slave.active
        }

    def _offerable(self, role: str, free: Millis) -> Millis:
        """What of `free` a framework of `role` may be offered (all of it, without quotas)."""
        return self._quota.offerable(role, free) if self.quotas else dict(free)

    def recover(
        self,
        framework_id: str,
        slave_id: str,
        resources: Resources,
        *,
        role: str | None = None,
        refuse_seconds: float | None = None,
        now: float = 0.0,
    ) -> None:
        """Resources come back from a framework (declined, unused, or a task ended): a
        multi-role framework's from `role`.

        With `refuse_seconds`, the framework is not offered them on that slave again for
        that long (a decline filter; a multi-role framework's in that role only).
        """
        fw = self.frameworks.get(framework_id) if role is None else None  # (the usual)
        if fw is None:  # a multi-role framework's client (or one not known)
            framework_id = self.clients.one(framework_id, role)
            fw = self.frameworks.get(framework_id)
        slave = self.slaves.get(slave_id) or self._slave(slave_id)
        held = slave.by_framework.get(framework_id)
        if held is None or fw is None:
            raise AllocatorError(f"framework {framework_id} holds nothing on slave {slave_id}")
        delta = resources.millis
        if held == delta:  # (the usual: all it held here comes back, compared at C speed)
            held.clear()
        elif slave.shared and not holds(held, delta):  # (before a copy is counted back)
            raise AllocatorError(f"framework {framework_id} does not hold {resources} there")
        else:
            try:
                sub_millis(held, delta, f"framework {framework_id} on slave {slave_id}")
            except ResourceError as e:
                raise AllocatorError(str(e)) from None
        share = role_share = None
        above: Mapping[str, Mapping[str, int]] = NOTHING
        if slave.reserved:
            on_slave: Mapping[str, int] = delta
            if slave.shared:  # (a shared volume is back only with its last copy)
                on_slave, mine, of_role, above = self._copies.split(
                    slave, framework_id, fw.role, delta, -1
                )
                share, role_share = _counted(mine, of_role)
            resources = Resources.from_millis(self._free_again(slave, on_slave))
        else:
            self._free_again(slave, delta)
        if not held:
            del slave.by_framework[framework_id]
            fw.slaves.discard(slave_id)
        self._role_frameworks[fw.role].unallocated(
            framework_id, resources if share is None else share
        )
        self._role_order.unallocated(fw.role, resources if role_share is None else role_share)
        if above:  # (a sub-role's copy: the volume stays counted there)
            for node, counted in above.items():
                self._role_order.recount(node, Resources.from_millis(stripped(counted)), 1)
        # the slave is visited next round if someone could use what is free there now (a
        # smaller minimum, or a new framework, wakes every slave; a hold is visited), and
        # with `refuse_seconds` the framework refuses it that long
        lone = self._lone.pop(slave_id, None)  # (what stood on it is asked anew)
        floors = self._floor if not self._floor_stale else self._floors()
        free = slave.unallocated
        if floors is None or fits_one(free, floors) or slave_id in self.reservations:
            self._visits.visit(slave_id)
        if refuse_seconds:
            self._refusing.refuse(fw, slave, delta, now + refuse_seconds, now, lone)

    def _free_again(self, slave: SlaveBook, delta: Mapping[str, int]) -> Mapping[str, int]:
        """`delta` of the slave is free again (`_take`, the other way): in its free, its
        idle reservations and the cluster's allocation. Returns what it is, whoever's (as
        shares count it: stripped on a slave holding reservations)."""
        free, everywhere = slave.unallocated, self._allocated
        if slave.reserved:
            self._idle.add(slave, delta, 1)
            for k, v in delta.items():
                if k in free:
                    free[k] += v
            what = stripped(delta)
            for k, v in what.items():
                everywhere[k] -= v
            return what
        # (what was taken is in the cluster's allocation, so it holds the key: it keeps
        # its zeros, nothing asks which resources it names; one loop for the two books,
        # once per task ending)
        for k, v in delta.items():
            everywhere[k] -= v
            if k in free:
                free[k] += v
        return delta

    def _give(self, framework_id: str, slave: SlaveBook, resources: Resources) -> None:
        if slave.shared:  # (copies of a shared volume count once: `shared`)
            role = self.frameworks[framework_id].role
            counted = self._copies.split(slave, framework_id, role, resources.millis, 1)
            self._take(slave, counted.slave)
            self._credit(framework_id, slave, resources, counted)
            return
        self._take(slave, resources.millis)
        self._credit(framework_id, slave, resources)

    def _take(self, slave: SlaveBook, delta: Mapping[str, int]) -> None:
        """`delta` of the slave is allocated now (offered, or in use): in the slave's free
        and the cluster's books (one loop for the two: a round does this once an offer)."""
        free, everywhere = slave.unallocated, self._allocated
        if self._lone:
            self._lone.pop(slave.slave_id, None)  # (what stood on it is asked anew)
        if slave.reserved:  # (the cluster's books count what it is, whoever's)
            self._idle.taken(slave, delta, everywhere)
            return
        for k, v in delta.items():
            everywhere[k] = everywhere.get(k, 0) + v
            if k in free:
                free[k] -= v

    def _credit(
        self,
        framework_id: str,
        slave: SlaveBook,
        resources: Resources,
        counted: Split | None = None,
    ) -> None:
        """Resources allocated on a slave are the framework's (given to it, or adopted):
        a framework the caller knows. `counted`: what of them its share and its role's
        count, where that is less (copies of a shared volume held already)."""
        fw = self.frameworks[framework_id]
        mine = slave.by_framework.get(framework_id)
        if mine is None:  # (the usual case in a round: a copy, not a sum into an empty book)
            slave.by_framework[framework_id] = dict(resources.millis)
        else:
            add_millis(mine, resources.millis)
        fw.slaves.add(slave.slave_id)
        if counted is not None:
            share, role_share = _counted(counted.share, counted.role)
            self._role_frameworks[fw.role].allocated(framework_id, share)
            self._role_order.allocated(fw.role, role_share)
            for node, twice in counted.above.items():  # (a sub-role's copy: counted once)
                self._role_order.recount(node, Resources.from_millis(stripped(twice)), -1)
            return
        if slave.reserved:  # (shares count what the resources are, whoever's)
            resources = self._what(slave, resources)
        self._role_frameworks[fw.role].allocated(framework_id, resources)
        self._role_order.allocated(fw.role, resources)

    def _what(self, slave: SlaveBook, resources: Resources) -> Resources:
        """What `resources` of `slave` are, whoever's (cpus reserved for a role count as
        cpus in shares and totals); as they are on a slave without reservations."""
        return Resources.taking(stripped(resources.millis)) if slave.reserved else resources

    # -- views -------------------------------------------------------------------------------
    @property
    def total(self) -> Resources:
        return self._total.resources

    def offerable_total(self) -> Resources:
        """The total less what is free on slaves out of the offers (`OutOfOffers`)."""
        if not self._away:
            return self._total.resources
        return Resources.from_millis(self._away.total_less_free(self._total.millis))

    def allocation(self, framework_id: str, role: str | None = None) -> Resources:
        """What a framework holds (a multi-role one's in `role`; None: in all its roles)."""
        clients = self.clients.of(framework_id, [role] if role is not None else ())
        if len(clients) == 1:
            fw = self._framework(clients[0])
            return self._role_frameworks[fw.role].allocation(fw.framework_id)
        return sum((self.allocation(client) for client in clients), Resources())

    def dominant_share(self, framework_id: str) -> float:
        """The framework's own dominant share of the cluster (unweighted)."""
        return self.allocation(framework_id).dominant_share(self.total)

    def framework_weight(self, framework_id: str) -> float:
        """A framework's weight as the ideal sees it: under flat policies it shares its
        role's weight with the role's other frameworks; on a tree the pools carry it."""
        return sum(self.framework_weights(framework_id).values())

    def framework_weights(self, framework_id: str) -> dict[str, float]:
        """`framework_weight` in each of its roles (a multi-role framework's: its part of
        each of its roles')."""
        weights = {}
        for client in self.clients.of(framework_id):
            role = self._framework(client).role
            if self._role_order.hierarchical:
                weights[role] = 1.0
            else:
                n = max(1, len(self._role_frameworks[role]))
                weights[role] = self._role_order.weight(role) / n
        return weights

    def held(self, framework_id: str, slave_id: str, role: str | None = None) -> Resources:
        """What a framework holds on a slave (a multi-role one's in `role`; None: all)."""
        slave = self._slave(slave_id)
        held: Millis = {}
        for client in self.clients.of(framework_id, [role] if role is not None else ()):
            add_millis(held, slave.by_framework.get(client, {}))
        return Resources.from_millis(held)

    def held_on(self, slave_id: str) -> Resources:
        """Everything allocated on a slave (offered or in use, by anyone)."""
        return Resources.from_millis(self._slave(slave_id).allocated())

    def free(self, slave_id: str) -> Resources:
        return Resources.from_millis(self._slave(slave_id).free())

    def allocated_total(self) -> Resources:
        """Everything offered or in use (a shared volume once a slave, as Mesos counts
        its resources used, however many copies are out)."""
        total: Millis = {}
        for slave in self.slaves.values():
            add_millis(total, slave.allocated())
        return Resources.from_millis(total)

    def order(self) -> Iterator[str]:
        """Active frameworks in the order they would be offered resources."""
        if self._largest.changed:
            self._ask_hopeless()
        yield from list(self._role_order.walk_order(self._role_frameworks))

    @property
    def quota_stage(self) -> QuotaStage:
        """Limits and guarantees as a round applies them (read by `master.cycle.why`)."""
        return self._quota

    # -- helpers -----------------------------------------------------------------------------
    def _books(self, framework_id: str, roles: Sequence[str] = ()) -> list[FrameworkBook]:
        """The books of a framework's clients: all, or those of `roles`."""
        return [self._framework(client) for client in self.clients.of(framework_id, roles)]

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


def _counted(share: Mapping[str, int], role: Mapping[str, int]) -> tuple[Resources, Resources]:
    """What a framework's share and its role's count of a change on a slave holding shared
    volumes (`Copies.split`), by what the resources are: one object when they count the
    same (the usual)."""
    mine = Resources.taking(stripped(share))
    return mine, mine if role is share or role == share else Resources.taking(stripped(role))
