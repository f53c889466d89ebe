"""The order in which roles are served: what the allocator asks of it, and nothing more.

Mesos's allocator talks to one abstract sorter; so does ours. Two implement it: the flat
`Sorter` (roles side by side: drf, asset, cpu, fifo) and the `RoleTree` (hierarchical
roles: hdrf, naive-hdrf, flat). The allocator holds a `RoleOrder` and never asks which.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

from protocol.wire.resources import Resources

if TYPE_CHECKING:
    from master.allocation.sorter import Sorter

Millis = dict[str, int]


class RoleOrder(Protocol):
    hierarchical: bool
    """Roles are paths (`eng/batch`) whose ancestors are role nodes too: quotas and
    weights apply to every node on a role's path."""

    # -- roles that have frameworks ----------------------------------------------------------
    def add(self, role: str) -> None:
        """A role gains its first framework (at its configured weight, else 1)."""
        ...

    def remove(self, role: str) -> None:
        """A role lost its last framework."""
        ...

    def __contains__(self, role: object) -> bool: ...

    def activate(self, role: str) -> None:
        """Some framework of `role` wants offers."""
        ...

    def deactivate(self, role: str) -> None:
        """No framework of `role` wants offers."""
        ...

    # -- configuration (any node, with frameworks or not) ------------------------------------
    def name_problem(self, role: str) -> str | None:
        """Why `role` cannot be a role in this order (None if it can)."""
        ...

    def set_weight(self, role: str, weight: float) -> None:
        """An operator's weight for `role`, now or whenever it comes."""
        ...

    def set_ordering(self, role: str, ordering: str) -> None:
        """How `role` orders its children; ValueError where that means nothing."""
        ...

    def weight(self, role: str) -> float:
        """`role`'s weight: its own, else the configured one, else 1."""
        ...

    def weights(self) -> dict[str, float]:
        """Every role node's weight (on a tree, pools too)."""
        ...

    def fifo_pools(self) -> dict[str, tuple[str, ...]]:
        """The pools that order their children by arrival (a tree's; none on a flat one),
        each with its children's names in that order: the one order preemption's ideal
        is given, so that it serves a fifo pool as the allocator does."""
        ...

    def set_arrival(self, role: str, arrival: int | None) -> None:
        """The earliest arrival (the allocator's number) of `role`'s frameworks now; None
        when it has none. Arrival orders a fifo pool's children (and a flat `fifo`
        order's roles, where roles alone are asked for: `first`, `sort`), not when a role
        was first seen. A flat `fifo` order walks frameworks by their own arrival, across
        roles (`first_framework`, `Sorter.walk_order`)."""
        ...

    def names(self) -> Iterable[str]:
        """Every role node (on a tree, pools too)."""
        ...

    # -- books -------------------------------------------------------------------------------
    def allocated(self, role: str, resources: Resources) -> None: ...

    def unallocated(self, role: str, resources: Resources) -> None: ...

    def recount(self, node: str, resources: Resources, sign: int) -> None:
        """On a tree: a shared volume `allocated` (sign -1) or `unallocated` (1) at a role
        below `node` is counted there and above for another copy already: counted once
        (`shared.Split.above`). A flat order has no such nodes."""
        ...

    def held(self, role: str) -> Millis:
        """What a role node holds (on a tree: its whole subtree); {} for one not known."""
        ...

    def wanting(self, role: str) -> bool:
        """Whether frameworks at `role` (on a tree: in its subtree) want offers."""
        ...

    # -- order -------------------------------------------------------------------------------
    def first(self, wanted: Callable[[str], bool]) -> str | None:
        """The role to serve next among those `wanted` accepts."""
        ...

    def first_framework(
        self, frameworks_of: Mapping[str, Sorter], wanted: Callable[[str], bool]
    ) -> str | None:
        """The framework to serve next: the first in its role's order (`frameworks_of`)
        that `wanted` accepts, in the role `first` would choose among the roles having
        one (a flat `fifo` order: the first come that `wanted` accepts, whatever its
        role). A round asks this once a slave."""
        ...

    def sort(self) -> Iterator[str]:
        """The roles that want offers, in the order they are served."""
        ...

    def walk_order(self, frameworks_of: Mapping[str, Sorter]) -> Iterable[str]:
        """Every active framework in the order they would be served (`frameworks_of`:
        each role's order): roles side by side as a round walks them (under a flat
        `fifo`, by arrival whatever the role), a tree role by role. Change nothing while
        walking it."""
        ...

    def ordering_share(self, role: str) -> float:
        """`role`'s place as the order sees it (share over weight, or over promise)."""
        ...

    def promise(self, role: str) -> float | None:
        """The fraction of the cluster promised to `role`'s subtree (None: no promises)."""
        ...

    def own_promise(self, role: str) -> float | None:
        """... to the frameworks registered in `role` itself (None: no promises)."""
        ...
