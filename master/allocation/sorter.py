"""The sorter: in which order clients (roles, or frameworks within a role) are served.

As in Mesos, the sorter knows nothing of offers, slaves going away or the network. It
keeps each client's allocation and the cluster total, and walks its active clients from
the lowest share up. The books are kept incrementally: the active clients stand in a list
sorted by share (the paper's heap, as a sorted list: a walk reads it in order, passing
over clients without taking them out and putting them back). A client whose allocation
changes is moved to its new place before the next walk (O(log n) to find, a memmove to
shift), once however often it changed since; only a change of the total -- which changes
every share at once -- makes the next walk sort the list anew.

The share is what a `Policy` makes of a client's allocation:

- `drf`:   dominant share, max_j alloc_j / total_j, divided by the weight (weighted DRF);
- `asset`: asset fairness, sum_j alloc_j / total_j, divided by the weight;
- `cpu`:   CPU-only fair sharing, alloc_cpus / total_cpus, divided by the weight;
- `fifo`:  no share at all: registration order alone (whoever came first is served first).
  As the allocator's order of roles, frameworks are walked by their own arrival whatever
  their roles (`_queue`: the lecture's one queue of jobs, as the `fifo` ideal orders
  them), not one role's all before the next's; a role's place (`set_arrival`, its
  earliest framework still here) orders only what asks for roles alone.

Ties are broken as Mesos's DRF sorter breaks them (`DRFSorter::Node::compareDRF`): by how
many times a client has been allocated to, fewest first, then by name. Clients with equal
shares therefore take turns: resources that come back unfiltered go to the one served
less often, not always to the older one. The count only grows (giving back does not lower
it) and starts anew when a client is added again. `fifo` keeps registration order.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from heapq import merge
from typing import Protocol

from protocol.wire.resources import CPUS, Resources, dominant_share, sub_millis

Millis = dict[str, int]


class Policy(Protocol):
    name: str

    def share(self, allocation: Mapping[str, int], total: Mapping[str, int]) -> float:
        """The unweighted share of `allocation` (fixed-point millis) in `total`."""
        ...


class DominantShare:
    name = "drf"

    def share(self, allocation: Mapping[str, int], total: Mapping[str, int]) -> float:
        return dominant_share(allocation, total)


class AssetShare:
    name = "asset"

    def share(self, allocation: Mapping[str, int], total: Mapping[str, int]) -> float:
        return sum(amount / t for name, amount in allocation.items() if (t := total.get(name)))


class CpuShare:
    name = "cpu"

    def share(self, allocation: Mapping[str, int], total: Mapping[str, int]) -> float:
        t = total.get(CPUS)
        return allocation.get(CPUS, 0) / t if t else 0.0


class Fifo:
    name = "fifo"

    def share(self, allocation: Mapping[str, int], total: Mapping[str, int]) -> float:
        return 0.0


POLICIES: dict[str, type[Policy]] = {
    "drf": DominantShare,
    "wdrf": DominantShare,  # weighted DRF is DRF with weights other than 1
    "asset": AssetShare,
    "cpu": CpuShare,
    "fifo": Fifo,
}


def make_policy(name: str) -> Policy:
    try:
        return POLICIES[name]()
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; one of {', '.join(POLICIES)}") from None


class Total:
    """The cluster total, shared by every sorter of one allocator.

    Role sorters and the framework sorters inside each role all divide by the same total;
    sharing one object (with a version the sorters compare against) makes adding a slave
    O(1) however many sorters there are.
    """

    def __init__(self) -> None:
        self.millis: Millis = {}
        self.version = 0
        # bumped by every change to any of its sorters' clients that may move one in an
        # order (an allocation, a weight, a client in or out): a walk's order of
        # frameworks, read again while nothing moved, is the one it read (`walk_order`)
        self.moves = 0

    def add(self, resources: Resources) -> None:
        for k, v in resources.millis.items():
            self.millis[k] = self.millis.get(k, 0) + v
        self.version += 1

    def remove(self, resources: Resources) -> None:
        sub_millis(self.millis, resources.millis, "the total")
        self.version += 1

    @property
    def resources(self) -> Resources:
        return Resources.from_millis(self.millis)


@dataclass(slots=True)
class _Client:
    name: str
    order: int
    weight: float = 1.0
    active: bool = True
    allocation: Millis = field(default_factory=dict)
    entry: _Entry | None = None  # where it stands in the order (None: it does not)
    count: int = 0  # how many times it was allocated to (Mesos's tie-break)


# (weighted share, tie-break, name); the tie-break is the allocation count, or under
# `fifo` the registration order
_Entry = tuple[float, int, str]


class Sorter:
    """Orders clients by weighted share; the Mesos sorter's verbs, without I/O.

    As the allocator's order of roles (a `RoleOrder`), the roles stand side by side: a
    role is a name, with no pools above it and no promise."""

    hierarchical = False

    def __init__(self, policy: Policy | str = "drf", total: Total | None = None) -> None:
        self.policy = make_policy(policy) if isinstance(policy, str) else policy
        # the share function itself for drf (one call less each time a client moves)
        self._share = dominant_share if self.policy.name == "drf" else self.policy.share
        self._clients: dict[str, _Client] = {}
        self._weights: dict[str, float] = {}  # configured, kept for clients that come later
        self._order: list[_Entry] = []  # the active clients, lowest weighted share first
        self._found = 0  # where in it `first` last found a client
        self._pending: dict[str, _Client] = {}  # clients to move to their place in it
        self._totals = total or Total()
        self._total = self._totals.millis
        self._seen_version = self._totals.version
        self._next_order = 0
        self._active = 0  # how many clients are active
        self._fifo = self.policy.name == "fifo"  # ties by registration order, not count
        self._walk: list[str] = []  # `walk_order`, as last made
        self._walked = (-1, -1)  # (Total.moves, Total.version) when it was made

    # -- clients ---------------------------------------------------------------------------
    def add(self, name: str, *, active: bool = True) -> None:
        """A client, at its configured weight (`set_weight`), else 1."""
        if name in self._clients:
            raise KeyError(f"client {name!r} is already in the sorter")
        client = _Client(name, self._next_order, self._weights.get(name, 1.0), active)
        self._next_order += 1
        self._clients[name] = client
        self._active += active
        self._totals.moves += 1
        self._push(client)
        if len(self._clients) == 2:
            self._seen_version = -1  # the lone client's place was never kept: sort anew

    def remove(self, name: str) -> None:
        client = self._clients.pop(name)
        self._pending.pop(name, None)
        self._active -= client.active
        self._totals.moves += 1
        self._unlist(client)

    def __contains__(self, name: object) -> bool:
        return name in self._clients

    def __len__(self) -> int:
        return len(self._clients)

    @property
    def active_count(self) -> int:
        return self._active

    def activate(self, name: str) -> None:
        client = self._clients[name]
        if not client.active:
            client.active = True
            self._active += 1
            self._totals.moves += 1
            self._push(client)

    def deactivate(self, name: str) -> None:
        client = self._clients[name]
        if client.active:
            client.active = False
            self._active -= 1
            self._totals.moves += 1
            self._pending.pop(name, None)
            self._unlist(client)

    def weight(self, name: str) -> float:
        client = self._clients.get(name)
        return client.weight if client is not None else self._weights.get(name, 1.0)

    def set_weight(self, name: str, weight: float) -> None:
        """A configured weight: the client's now if it is here, and whenever it comes."""
        if weight <= 0:
            raise ValueError(f"weight must be positive, got {weight}")
        self._weights[name] = weight
        client = self._clients.get(name)
        if client is not None:
            client.weight = weight
            self._totals.moves += 1
            self._push(client)

    def weights(self) -> dict[str, float]:
        return {name: client.weight for name, client in self._clients.items()}

    def names(self) -> list[str]:
        return list(self._clients)

    def name_problem(self, name: str) -> str | None:
        return None  # any name is a client

    def fifo_pools(self) -> dict[str, tuple[str, ...]]:
        return {}  # (flat roles: no pools)

    def set_arrival(self, name: str, arrival: int | None) -> None:
        """As the allocator's order of roles: the earliest arrival of the role's frameworks
        now, its place under `fifo` (not when the role came, which a framework since gone
        may have made it; None: none left, it leaves next). As a role's order of its
        frameworks: a framework's own arrival, which a flat `fifo` walk merges the roles'
        lists by (`_queue`)."""
        client = self._clients[name]
        if arrival is not None and arrival != client.order:
            client.order = arrival
            self._totals.moves += 1
            self._push(client)

    def first_added(self) -> str | None:
        """The client added earliest of those here (the first in `fifo`'s order)."""
        return next(iter(self._clients), None)

    def set_ordering(self, name: str, ordering: str) -> None:
        if ordering != "drf":
            raise ValueError(f"a per-pool ordering ({name}: {ordering}) needs a tree policy")

    # -- books -----------------------------------------------------------------------------
    def allocated(self, name: str, resources: Resources) -> None:
        """Record resources given to a client (offered or in use): one more allocation."""
        client = self._clients[name]
        client.count += 1
        self._totals.moves += 1
        alloc = client.allocation
        for k, v in resources.millis.items():  # (add_millis inlined: twice an offer)
            alloc[k] = alloc.get(k, 0) + v
        if client.active and (client.entry is None or len(self._clients) > 1):
            self._pending[name] = client  # (_push inlined)

    def recount(self, name: str, resources: Resources, sign: int) -> None:
        """(A tree's: flat roles have no subtrees to count a shared volume's copies in twice.)"""

    def allocation_count(self, name: str) -> int:
        """How many times the client was allocated to (the tie-break among equal shares)."""
        return self._clients[name].count

    def unallocated(self, name: str, resources: Resources) -> None:
        """Record resources a client gave back (ResourceError, and no change, if it holds
        less)."""
        client = self._clients[name]
        self._totals.moves += 1
        alloc, delta = client.allocation, resources.millis
        if alloc == delta:  # (the usual, one framework a role: all it held comes back)
            alloc.clear()
        else:
            for k, v in delta.items():  # (sub_millis inlined: twice a task ending)
                if alloc.get(k, 0) < v:
                    sub_millis(alloc, delta, f"client {name!r}")  # (it raises, naming it)
            for k, v in delta.items():
                if v:
                    left = alloc[k] - v
                    if left:
                        alloc[k] = left
                    else:
                        del alloc[k]
        if client.active and (client.entry is None or len(self._clients) > 1):
            self._pending[name] = client  # (_push inlined)

    def allocation(self, name: str) -> Resources:
        return Resources.from_millis(self._clients[name].allocation)

    def held(self, name: str) -> Millis:
        client = self._clients.get(name)
        return dict(client.allocation) if client is not None else {}

    def wanting(self, name: str) -> bool:
        client = self._clients.get(name)
        return client is not None and client.active

    def add_total(self, resources: Resources) -> None:
        self._totals.add(resources)

    def remove_total(self, resources: Resources) -> None:
        self._totals.remove(resources)

    @property
    def total(self) -> Resources:
        return self._totals.resources

    # -- order -----------------------------------------------------------------------------
    def share(self, name: str) -> float:
        """The client's share divided by its weight (what the order is made of)."""
        client = self._clients[name]
        return self.policy.share(client.allocation, self._total) / client.weight

    ordering_share = share

    def promise(self, name: str) -> float | None:
        return None  # side by side, nothing is promised

    own_promise = promise

    def first(self, wanted: Callable[[str], bool] = lambda name: True) -> str | None:
        """The active client with the lowest weighted share for which `wanted` is true.

        Costs one call of `wanted` for every client it passes over (the usual case passes
        over none). `wanted` must not record allocations; do that after this returns.
        """
        if self._pending or self._seen_version != self._totals.version:
            self._fresh()  # (`ordered` inlined: once an offer)
        for i, (_, _, name) in enumerate(self._order):
            if wanted(name):
                self._found = i  # (where it stands: it is likely to move next)
                return name
        return None

    def first_framework(
        self, frameworks_of: Mapping[str, Sorter], wanted: Callable[[str], bool]
    ) -> str | None:
        """Roles side by side: the roles' order and each role's walked here in one loop,
        not through `first` and a function a role. A round passes over a framework for
        every slave it declined (every other slave when all tie after declining: 25,000
        passes at 50,000 slaves), so a pass costs a lookup and a call. Under `fifo`, by
        arrival across roles (`_queue`)."""
        if self._fifo:
            return next(filter(wanted, self._queue(frameworks_of)), None)
        for i, (_, _, role) in enumerate(self.ordered()):
            inner = frameworks_of[role]  # (`ordered` inlined: once a role a walk passes)
            if inner._pending or inner._seen_version != inner._totals.version:
                inner._fresh()
            for _, _, framework_id in inner._order:
                if wanted(framework_id):
                    self._found = i  # (where the role stands: it is likely to move next)
                    return framework_id
        return None

    def walk_order(self, frameworks_of: Mapping[str, Sorter]) -> Iterable[str]:
        """Roles side by side: every active framework in the order `first_framework`
        walks them (the roles' order, and each role's). A walk that went through them
        all, nobody taking the slave, keeps them as one list, read by the next walks
        while no client moved (`Total.moves`): a round's walks between two offers it
        books (every slave all decline) read the one list, and a walk that stops at the
        first framework, which the round then books, makes none. Its roles' sorters share
        its `Total` (an allocator's all do). Change nothing while walking it."""
        totals = self._totals
        if self._walked == (totals.moves, totals.version):
            return self._walk
        return self._walking(frameworks_of)

    def _walking(self, frameworks_of: Mapping[str, Sorter]) -> Iterator[str]:
        totals = self._totals
        walked, version = (totals.moves, totals.version), totals.version
        walk: list[str] = []
        if self._fifo:
            for name in self._queue(frameworks_of):
                walk.append(name)
                yield name
            self._walk, self._walked = walk, walked
            return
        for _, _, role in self.ordered():
            inner = frameworks_of[role]  # (`ordered` inlined: once a role)
            if inner._pending or inner._seen_version != version:
                inner._fresh()
            for _, _, name in inner._order:
                walk.append(name)
                yield name
        self._walk, self._walked = walk, walked

    def _queue(self, frameworks_of: Mapping[str, Sorter]) -> Iterator[str]:
        """Under `fifo`: every active framework by arrival, whatever its role -- the
        roles' own lists merged (a fifo sorter's entries are (0, arrival, name), the
        allocator's numbers: `set_arrival`). Not one role's frameworks all before the
        next role's: a role a framework of which came first put every later framework
        of its own before everyone else's, for as long as that one stayed."""
        lists = [frameworks_of[role].ordered() for _, _, role in self.ordered()]
        if len(lists) == 1:
            return (name for _, _, name in lists[0])
        return (name for _, _, name in merge(*lists))

    def ordered(self) -> list[_Entry]:
        """The active clients as (weighted share, tie-break, name), lowest first:
        the sorter's own list, to read in place (change nothing in the sorter meanwhile)."""
        if self._pending or self._seen_version != self._totals.version:
            self._fresh()
        return self._order

    def sort(self) -> Iterator[str]:
        """Every active client, lowest weighted share first (ties: fewest allocations,
        then name; under `fifo`, registration order)."""
        return iter([name for _, _, name in self.ordered()])

    def _push(self, client: _Client) -> None:
        """The client's share changed: it moves to its new place before the next walk (a
        client whose allocation changes many times between two walks -- every task ending
        between two rounds -- moves once). A lone client has no place to move to."""
        if client.active and (client.entry is None or len(self._clients) > 1):
            self._pending[client.name] = client

    def _unlist(self, client: _Client) -> None:
        if client.entry is not None:
            order = self._order
            del order[bisect_left(order, client.entry)]
            client.entry = None

    def _fresh(self) -> None:
        if self._seen_version != self._totals.version:
            self._rebuild()
            return
        if not self._pending:
            return
        order, total, share, fifo = self._order, self._total, self._share, self._fifo
        found = self._found
        for c in self._pending.values():
            entry = c.entry
            if entry is not None:  # (_unlist inlined, where `first` found it if it is there)
                if found < len(order) and order[found] is entry:
                    del order[found]
                else:
                    del order[bisect_left(order, entry)]
            entry = c.entry = (
                share(c.allocation, total) / c.weight,
                c.order if fifo else c.count,
                c.name,
            )
            if not order or order[-1] < entry:
                order.append(entry)  # to the back of the line: where one just served goes
            elif len(order) == 1 or order[-2] < entry:
                order.insert(len(order) - 1, entry)  # just before it: ties by name, often
            else:
                insort(order, entry)
        self._pending.clear()

    def _rebuild(self) -> None:
        """Recompute every share (the total changed)."""
        self._seen_version = self._totals.version
        total, share, fifo = self._total, self._share, self._fifo
        order = []
        for client in self._clients.values():
            client.entry = None
            if client.active:
                weighted = share(client.allocation, total) / client.weight
                client.entry = (weighted, client.order if fifo else client.count, client.name)
                order.append(client.entry)
        order.sort()
        self._order = order
        self._pending.clear()
