"""Reserved resources in the allocation: whose they are, and who may be offered them.

A slave's resources reserved for a role (`cpus(team-a)`: `protocol.wire.reservations`) are
offered only to frameworks of that role and of the roles below it (Mesos's hierarchical
reservations), beside whatever unreserved resources the framework may have. They count
as their base resource everywhere a share is taken (a role's DRF share, the cluster's
total), and a role's idle reservations count towards its quota, as in Mesos: consumed
quota is what a role holds plus what is reserved for it and not allocated.

Slaves without reservations never come here: the round's hot path is unchanged for them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from master.allocation.ledger import Floor, FrameworkBook, SlaveBook, can_use, declined
from master.allocation.shared import offered_shared
from master.allocation.sorter import Millis
from protocol.wire.reservations import (
    base_of,
    is_plain,
    offered_to,
    parse_key,
    shared_keys,
    stripped,
)
from protocol.wire.resources import Resources, add_millis, sub_millis

if TYPE_CHECKING:
    from master.allocation.role_order import RoleOrder
    from master.allocation.sorter import Sorter


def reserved_roles(millis: Mapping[str, int]) -> dict[str, str]:
    """The identities among `millis` that are not plain names, with the role each is
    reserved for ("" for a volume on unreserved disk)."""
    return {key: parse_key(key).role or "" for key in millis if not is_plain(key)}


class IdleReservations:
    """What is reserved for each role and not allocated (stripped, by reservation role):
    the quota stage counts it as the role's, and as nobody else's headroom.

    Kept from the first time it is read (a quota's stage, preemption's view of the
    cluster): until then nothing reads it, and a round offering reserved slaves books
    nothing here (a fifth of such a round's work); the first read counts it from every
    slave's free resources (`slaves`), which it always equals."""

    def __init__(self, slaves: Callable[[], Iterable[SlaveBook]] | None = None) -> None:
        """`slaves`: the allocator's, counted at the first read (None: kept from now)."""
        self._by_role: dict[str, Millis] = {}
        self._all: Millis = {}  # the sum over roles
        self._slaves = slaves
        self._kept = slaves is None

    @property
    def by_role(self) -> dict[str, Millis]:
        self._keep()
        return self._by_role

    @property
    def all(self) -> Millis:
        self._keep()
        return self._all

    def _keep(self) -> None:
        if self._kept:
            return
        self._kept = True
        assert self._slaves is not None
        for slave in self._slaves():
            if slave.reserved:
                self.add(slave, slave.unallocated, 1)

    def add(self, slave: SlaveBook, delta: Mapping[str, int], sign: int) -> None:
        """`delta` of `slave`'s identities becomes idle (sign 1) or allocated (-1)."""
        if not self._kept:
            return
        reserved, by_role, every = slave.reserved, self._by_role, self._all
        for key, amount in delta.items():
            role = reserved.get(key)
            if not role or not amount:
                continue
            base = base_of(key)
            n = sign * amount
            every[base] = every.get(base, 0) + n
            mine = by_role.get(role)
            if mine is None:
                mine = by_role[role] = {}
            left = mine.get(base, 0) + n
            if left:
                mine[base] = left
            else:
                del mine[base]
                if not mine:
                    del by_role[role]

    def taken(self, slave: SlaveBook, delta: Mapping[str, int], allocated: Millis) -> None:
        """`delta` of `slave` is allocated now (offered, or in use): out of its free
        resources and of the idle reservations (`add`, sign -1), and into the cluster's
        `allocated` as what it is, whoever's -- one loop for the three books, each key's
        base looked up once (once an offer of a slave holding reservations)."""
        free, reserved, kept = slave.unallocated, slave.reserved, self._kept
        by_role, every = self._by_role, self._all
        for key, amount in delta.items():
            if key in free:
                free[key] -= amount
            base = base_of(key)
            allocated[base] = allocated.get(base, 0) + amount
            if not kept or not amount or not (role := reserved.get(key)):
                continue  # (not kept yet: the two books alone)
            every[base] = every.get(base, 0) - amount
            mine = by_role.get(role)
            if mine is None:
                mine = by_role[role] = {}
            left = mine.get(base, 0) - amount
            if left:
                mine[base] = left
            else:
                del mine[base]
                if not mine:
                    del by_role[role]

    def of_subtree(self, role: str, tree: bool) -> Millis:
        """Idle reservations of `role` (on a tree: and of the roles below it)."""
        out: Millis = {}
        for r, amounts in self.by_role.items():
            if r == role or (tree and r.startswith(role + "/")):
                for k, v in amounts.items():
                    out[k] = out.get(k, 0) + v
        return out


def visible(slave: SlaveBook, role: str, free: Mapping[str, int]) -> tuple[Millis, Millis]:
    """What of a reserved slave's `free` a framework of `role` may see: (unreserved,
    reserved for it or its ancestors). Others' reservations are left out, and so are
    shared volumes (offered beside what a framework sees, if it takes them:
    `shared.offered_shared`)."""
    unreserved: Millis = {}
    mine: Millis = {}
    reserved, shared = slave.reserved, slave.shared
    for key, amount in free.items():
        if amount <= 0 or (shared and key in shared):
            continue
        owner = reserved.get(key)
        if not owner:
            unreserved[key] = amount
        elif owner == role or offered_to(owner, role):  # (its own, the usual: no call)
            mine[key] = amount
    return unreserved, mine


def left_over(slave: SlaveBook) -> bool:
    """Whether anything of a reserved slave is free, its shared volumes aside (those are
    offered beside the rest, never alone). A plain loop: asked after each offer of it."""
    shared = slave.shared
    for key, amount in slave.unallocated.items():
        if amount > 0 and not (shared and key in shared):
            return True
    return False


ReservedPick = Callable[[SlaveBook, set[str], set[str]], tuple[str, Millis] | None]
"""A slave holding reservations, who was offered it this round, and which of its shared
volumes: whom to offer what."""


def reserved_pick(
    roles: RoleOrder,
    role_frameworks: Mapping[str, Sorter],
    frameworks: Mapping[str, FrameworkBook],
    now: float,
    floor: Floor,
    offerable: Callable[[str, Millis], Millis],
) -> ReservedPick:
    """The pick for a slave holding reservations: the first framework in order, not yet
    offered this slave in the round (`given`), that wants what it may see of it -- its
    role's reservations (and shared volumes not offered in the round, `shown`, if it takes
    them), and unreserved resources as quota lets its role have them (`offerable`). The
    round asks again after each offer: others' reservations and what quota cut are still
    to offer."""

    # the slave of the moment, who was offered it in the round, and what each role may
    # see of it as it is now (set by `pick`: one `wanted` serves the round, no closure
    # made a slave)
    slave = SlaveBook("", Resources())
    given: set[str] = set()
    by_role: dict[str, Millis] = {}

    def wanted(framework_id: str) -> bool:
        if framework_id in given:
            return False
        fw = frameworks[framework_id]
        offer = by_role.get(fw.role)
        if offer is None:
            unreserved, mine = visible(slave, fw.role, slave.unallocated)
            if unreserved:
                offer = offerable(fw.role, unreserved)
                offer.update(mine)
            else:
                offer = mine  # (its role's reservations alone: visible's own dict)
            by_role[fw.role] = offer
        if not offer:
            return False
        # offer filters and the master's minimum read what the resources are;
        # a decline filter, whose they are
        if not can_use(fw, stripped(offer), floor):
            return False
        return not declined(fw, slave.slave_id, offer, now)

    def pick(visited: SlaveBook, offered: set[str], shown: set[str]) -> tuple[str, Millis] | None:
        nonlocal slave, given
        if not left_over(visited):
            return None  # (all taken, shared volumes aside: no walk past every framework)
        slave, given = visited, offered
        by_role.clear()
        chosen = roles.first_framework(role_frameworks, wanted)
        if chosen is None:
            return None
        fw = frameworks[chosen]
        offer = by_role[fw.role]
        if visited.shared and fw.shared:  # (and its role's shared volumes, in use or not)
            offer = offered_shared(visited, fw.role, shown, offer)
        return chosen, offer

    return pick


def replace_free(
    slave: SlaveBook,
    idle: IdleReservations,
    consumed: Mapping[str, int],
    converted: Mapping[str, int],
) -> None:
    """`consumed` of the slave's free resources become `converted` (an operator's RESERVE
    and the like), in its books and the idle reservations' count."""
    idle.add(slave, consumed, -1)
    free = slave.unallocated
    for k, v in consumed.items():
        free[k] -= v
    add_millis(free, converted)
    convert_total(slave, consumed, converted)
    idle.add(slave, converted, 1)


def convert_total(
    slave: SlaveBook, consumed: Mapping[str, int], converted: Mapping[str, int]
) -> None:
    """The slave's total with `consumed` (which it holds) replaced by `converted`."""
    total = dict(slave.total.millis)
    sub_millis(total, consumed, f"slave {slave.slave_id}'s total")
    add_millis(total, converted)
    slave.total = Resources.from_millis(total)
    slave.reserved = reserved_roles(total)
    slave.shared = shared_keys(total)
    # (free names every resource of the total, and no other)
    free = slave.unallocated
    slave.unallocated = {k: free.get(k, 0) for k in total}
