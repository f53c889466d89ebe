"""Shared persistent volumes in the allocation (Mesos's `Resource.shared`).

A shared volume is one directory that several tasks use at once, so it is allocated many
times over: each task holds a copy of it, and it stays offerable while tasks use it -- to
frameworks that declared the SHARED_RESOURCES capability, of the roles it is reserved for,
and at most once a slave in a round (Mesos's `offeredSharedResources`: one framework is
offered a slave's volume in a round, another in the next; `reserved.visible`).

What a copy counts as, where:
- a framework's books (`SlaveBook.by_framework`) hold every copy: a task's end gives its
  copy back, as any other resource;
- a framework's share (its sorter) and its role's (the role order, which quotas read)
  count the volume once, however many copies they hold -- Mesos's DRF sorter;
- the slave's free resources, its idle reservations and the cluster's allocation count it
  once, while any copy is out.

Everything non-shared is allocated at most once, as before; only these may be allocated
more than once, and each copy is the whole volume. Slaves without shared volumes never
come here (`SlaveBook.shared` is empty).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from master.allocation.ledger import AllocatorError, SlaveBook
from protocol.wire.reservations import offered_to, shared_keys

Counts = dict[str, int]  # copies, by holder (or role)
NOTHING: Mapping[str, Mapping[str, int]] = {}  # (no role node counts a volume for another copy)
NONE: Mapping[str, int] = {}  # (nobody holds a copy)
NO_VOLUMES: Mapping[str, Mapping[str, int]] = {}


class Volumes(dict[str, Counts]):
    """A slave's counts, by shared volume (its key). A class of its own, not a plain
    dict, for the garbage collector: a full collection untracks a plain dict holding
    nothing it could track (a slave's book with no copies out), and putting a volume's
    counts in tracks it again, as a young object -- a round giving copies of 10,000
    slaves' volumes left 20,000 such books for its young collection to walk (4-5 ms of
    a 170 ms round). An instance of a subclass stays tracked, and old."""

    __slots__ = ()


def offered_shared(
    slave: SlaveBook, role: str, shown: set[str], beside: Mapping[str, int]
) -> dict[str, int]:
    """What a framework of `role` taking shared resources is offered of `slave`: `beside`
    (what else it sees), and the shared volumes of its role (or an ancestor's), whole, in
    use or not, but those offered in this round already (`shown`)."""
    reserved, total = slave.reserved, slave.total.millis
    offer = dict(beside)
    for key in slave.shared:
        if key not in shown and ((owner := reserved[key]) == role or offered_to(owner, role)):
            offer[key] = total[key]
    return offer


class Copies:
    """How many copies of each shared volume each client (and each role) holds, by slave.
    A holder "" is nobody known yet (tasks found on a slave before their framework came
    back: `Allocator.hold_unowned`); it has no role."""

    def __init__(self, tree: bool = False) -> None:
        """`tree`: roles are paths whose ancestors hold their subtree's copies too (the
        role tree's policies): a volume counts once in every node, as Mesos's sorter."""
        # by slave id, then volume (a slave's book stays until it goes: a round counting
        # copies makes no object the garbage collector walks, such as a key's tuple)
        self._holders: dict[str, Volumes] = {}  # slave id -> key -> holder -> n
        self._roles: dict[str, Volumes] = {}  # slave id -> key -> role -> n
        # on a tree: slave id -> key -> role node -> copies its whole subtree holds
        self._subtrees: dict[str, Volumes] = {}
        self._tree = tree

    def split(
        self,
        slave: SlaveBook,
        holder: str,
        role: str | None,
        delta: Mapping[str, int],
        sign: int,
    ) -> Split:
        """`delta` of `slave` becomes `holder`'s (sign 1) or no longer is (-1), a client of
        `role` (None: nobody's yet). Counts its copies, and returns what of `delta` each
        book counts: the slave's, the holder's share, its role's -- a shared volume in
        each only as the first copy comes there or the last goes -- and, on a tree, the
        role's ancestors that count it already (or still) for another copy below them.
        AllocatorError (and nothing counted) if a copy is not the whole volume or more go
        than are held."""
        shared = slave.shared
        keys = shared.intersection(delta) if shared else shared
        if not keys:
            return Split(delta, delta, delta, NOTHING)
        sid, sizes = slave.slave_id, slave.total.millis
        holders_of = self._holders.get(sid) or NO_VOLUMES
        if sign > 0 and role is not None and not self._tree:
            for key in keys:  # (the usual in a round: one copy of volumes nobody holds)
                if delta[key] != sizes[key] or holders_of.get(key):
                    break
            else:  # (then each book counts it as it is: `delta`, no copy to check)
                for key in keys:
                    _count(self._holders, sid, key, holder, 1)
                    _count(self._roles, sid, key, role, 1)
                return Split(delta, delta, delta, NOTHING)
        nodes = (role, *_path(role)) if self._tree and role is not None else ()
        above: dict[str, dict[str, int]] = {}
        # each volume's size, copies, and whether the slave's, the holder's share and its
        # role's count it now (or no longer): checked all before anything is counted
        counted: list[tuple[str, int, int, bool, bool, bool]] = []
        same = True  # (whether the three books count the same: the usual, one book)
        whole = True  # (and each volume once, as one copy of it comes: `delta` itself)
        for key in keys:
            size = sizes[key]
            copies, rest = divmod(delta[key], size)
            if rest or copies <= 0:
                raise AllocatorError(
                    f"{delta[key] / 1000:g} of shared volume {key} on slave {sid}: a copy "
                    f"is the whole volume ({size / 1000:g})"
                )
            n = sign * copies
            holders = holders_of.get(key)
            mine = holders.get(holder, 0) if holders else 0
            if mine + n < 0:
                raise AllocatorError(
                    f"{holder or 'nobody'} holds {mine} copies of {key} on slave {sid}, "
                    f"not {copies}"
                )
            if not holders:  # (the usual: nobody holds one, every book counts the first)
                counted.append((key, size, n, True, True, role is not None))
                same = same and role is not None
                whole = whole and n == 1
                continue
            whole = False
            # (a book counts it as its first copy comes, or its last goes)
            everyone = sum(holders.values())
            in_slave = not everyone if n > 0 else everyone + n == 0
            in_share = not mine if n > 0 else mine + n == 0
            in_role = False
            if role is not None:
                of_role = (self._roles.get(sid) or NO_VOLUMES).get(key, NONE).get(role, 0)
                in_role = not of_role if n > 0 else of_role + n == 0
            if nodes and in_role:  # (the role's own count it now, or no longer)
                subtrees = (self._subtrees.get(sid) or NO_VOLUMES).get(key, NONE)
                for node in nodes:  # (up from the role: the first holding another copy)
                    if subtrees.get(node, 0) + min(n, 0) > 0:
                        above.setdefault(node, {})[key] = size
                        break
            counted.append((key, size, n, in_slave, in_share, in_role))
            same = same and in_slave == in_share == in_role
        if whole and same:  # (a round's offer of a volume nobody holds: no new book)
            on_slave = share = of_roles = delta
        else:
            on_slave = {k: v for k, v in delta.items() if k not in keys}
            share = on_slave if same else dict(on_slave)
            of_roles = on_slave if same else dict(on_slave)
            for key, size, _, in_slave, in_share, in_role in counted:
                if in_slave:
                    on_slave[key] = size
                if in_share:
                    share[key] = size
                if in_role:
                    of_roles[key] = size
        for key, _, n, _, _, _ in counted:
            _count(self._holders, sid, key, holder, n)
            if role is not None:
                _count(self._roles, sid, key, role, n)
            for node in nodes:
                _count(self._subtrees, sid, key, node, n)
        return Split(on_slave, share, of_roles, above)

    def check_conversion(
        self,
        slave: SlaveBook,
        holder: str,
        consumed: Mapping[str, int],
        converted: Mapping[str, int],
    ) -> None:
        """AllocatorError (before anything changes) unless `holder` may turn `consumed` of
        what it holds into `converted` (a DESTROY or CREATE): a shared volume consumed is
        the slave's (once: a copy is not another volume) and `holder`'s alone, every
        copy of it (the master rescinds the offers of a volume it destroys, and refuses it
        while a task uses it); one made is not there already."""
        total, sid = slave.total.millis, slave.slave_id
        for key in slave.shared.intersection(consumed):
            if consumed[key] != total[key]:
                raise AllocatorError(
                    f"{consumed[key] / 1000:g} of shared volume {key} on slave {sid}: it is "
                    f"{total[key] / 1000:g}, one volume however many copies are held"
                )
            holders = self.holders(sid, key)
            if holders != {holder: 1}:
                raise AllocatorError(f"{key} is held by others too, or twice ({holders})")
        for key in shared_keys(converted):
            if key in total and key not in consumed:
                raise AllocatorError(f"shared volume {key} is on slave {sid} already")

    def holders(self, slave_id: str, key: str) -> Counts:
        """Who holds copies of a shared volume on a slave, and how many ("": nobody known)."""
        return dict(self._holders.get(slave_id, NO_VOLUMES).get(key, NONE))

    def forget(self, slave_id: str) -> None:
        """The slave is gone, with every copy of its volumes."""
        for book in (self._holders, self._roles, self._subtrees):
            book.pop(slave_id, None)


class Split(NamedTuple):
    """What of a delta of copies each book counts (`Copies.split`)."""

    slave: Mapping[str, int]  # the slave's free and the cluster's allocation
    share: Mapping[str, int]  # the holder's share (its sorter)
    role: Mapping[str, int]  # its role's (the role order, from the role up)
    # the role node (itself or an ancestor) from which up a subtree counts the volume
    # for another copy below it already (or still): not counted (uncounted) there again
    # though the role's own books count it (`RoleOrder.recount`)
    above: Mapping[str, Mapping[str, int]]


def _path(role: str) -> tuple[str, ...]:
    """A role's ancestors, nearest first (`a/b/c`: `a/b`, `a`)."""
    parts = role.split("/")
    return tuple("/".join(parts[:i]) for i in range(len(parts) - 1, 0, -1))


def _count(book: dict[str, Volumes], slave_id: str, key: str, who: str, n: int) -> None:
    volumes = book.get(slave_id)
    if volumes is None:
        volumes = book[slave_id] = Volumes()
    counts = volumes.get(key)
    if counts is None:
        volumes[key] = {who: n}
        return
    left = counts.get(who, 0) + n
    if left:
        counts[who] = left
    else:
        del counts[who]
        if not counts:
            del volumes[key]
