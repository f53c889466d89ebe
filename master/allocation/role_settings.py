"""The roles' settings: weights, orderings and quotas, as the operator sets them (one by
one, or a roles file whole), each checked against the policy's roles, and what each role
node stands at for the shell to show.

This is Mesos's role side of the allocator (`updateWeights`, `updateQuota`) apart from
its books: a setting changes how the next rounds order roles and cut offers, never what
anybody holds, so the only thing it does to a round is ask for one (`wake`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from master.allocation.ledger import AllocatorError
from master.allocation.quota import Quota, nesting_problem
from master.allocation.quota_stage import QuotaStage, RoleStanding
from master.allocation.role_order import RoleOrder
from master.allocation.sorter import Millis


class RoleSettings:
    def __init__(self, order: RoleOrder, quota: QuotaStage, wake: Callable[[], None]) -> None:
        """`order`: the roles' order the settings go into; `quota`: the quota stage that
        keeps the quotas; `wake`: every slave is worth a visit again (a setting can make
        what nobody was offered offerable)."""
        self._order = order
        self._quota = quota
        self._wake = wake
        self.quotas = quota.quotas  # by role node (on a tree, pools too)
        self._weights: dict[str, float] = {}  # the configured ones (shown if unused)

    # -- setting -----------------------------------------------------------------------------
    def set_weight(self, role: str, weight: float) -> None:
        """Configure a role's weight; in a tree, any node's: `eng` as well as
        `eng/backend`."""
        if not weight > 0:
            raise AllocatorError(f"weight must be positive, got {weight}")
        problem = self.problem(role)
        if problem:
            raise AllocatorError(problem)
        self._weights[role] = weight
        self._order.set_weight(role, weight)

    def set_ordering(self, role: str, ordering: str) -> None:
        """How a pool orders its children: drf, fair (memory alone) or fifo (tree policies)."""
        try:
            self._order.set_ordering(role, ordering)
        except ValueError as e:
            raise AllocatorError(str(e)) from None

    def apply(self, roles: Mapping[str, Any]) -> None:
        """Weights, orderings and quotas from a roles file (`master.roles_file`)."""
        quotas = {r: spec.quota.quota() if spec.quota else None for r, spec in roles.items()}
        problem = next(filter(None, map(self.problem, roles)), None)
        problem = problem or (nesting_problem(self.quotas, quotas) if self.is_tree() else None)
        if problem:  # (the file as a whole: one by one, a valid one could fail halfway)
            raise AllocatorError(problem)
        for role, spec in roles.items():
            self.set_weight(role, spec.weight)
            self.set_ordering(role, spec.ordering)
            self.quotas.pop(role, None)  # (set again below where the file gives one)
        self.quotas.update({r: q for r, q in quotas.items() if q is not None})
        self._wake()

    def set_quota(self, role: str, quota: Quota) -> None:
        problem = self.quota_problem(role, quota)
        if problem:
            raise AllocatorError(problem)
        self.quotas[role] = quota
        self._wake()

    def remove_quota(self, role: str) -> None:
        if self.quotas.pop(role, None) is not None:
            self._wake()

    # -- checking ----------------------------------------------------------------------------
    def problem(self, role: str) -> str | None:
        """Why `role` cannot be a role under this policy (None if it can)."""
        return self._order.name_problem(role)

    def quota_problem(self, role: str, quota: Quota | None) -> str | None:
        """Why `role` cannot have `quota` (None: cleared) beside the others' (None if it
        can): a role this policy has not, or guarantees that do not nest on a tree."""
        return self.quotas_problem({role: quota})

    def quotas_problem(self, changes: Mapping[str, Quota | None]) -> str | None:
        """`quota_problem` of several roles' quotas set at once (None: cleared)."""
        for role in changes:
            if problem := self.problem(role):
                return problem
        return nesting_problem(self.quotas, changes) if self.is_tree() else None

    def is_tree(self) -> bool:
        """Roles are paths whose ancestors count (quotas and weights on every node)."""
        return self._order.hierarchical

    # -- standing ----------------------------------------------------------------------------
    def views(self) -> list[RoleStanding]:
        """Every role and pool (and every role with a quota or a configured weight): weight,
        share, promise, quota."""
        return self._quota.standings(set(self._weights))

    def weight(self, role: str) -> float:
        """A role's weight: configured, else 1 (a role nobody is in yet has one too)."""
        return self._order.weight(role)

    def pool_weights(self) -> dict[str, float]:
        """Every role node's weight (on a tree, pools too)."""
        return self._order.weights()

    def fifo_pools(self) -> dict[str, tuple[str, ...]]:
        """The pools whose children are served by arrival, not by share (`fifo`), each
        with its children's names in that order (`RoleOrder.fifo_pools`)."""
        return self._order.fifo_pools()

    def share(self, role: str) -> float:
        """The role's share as the order sees it (policy share / weight, or / promise)."""
        return self._order.ordering_share(role)

    def promise(self, role: str) -> float | None:
        """What a tree policy promises the frameworks of `role` (None for flat policies)."""
        return self._order.own_promise(role)

    def held(self, role: str) -> Millis:
        """What a role node holds (on a tree: its whole subtree), offered or in use."""
        return self._order.held(role)

    def unsatisfiable(self) -> dict[str, str]:
        """Guarantees the cluster cannot meet, and why (reported, not refused)."""
        return self._quota.unsatisfiable()
