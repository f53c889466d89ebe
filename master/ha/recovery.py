"""A new leader takes over: what it reads from the registry, what it announces, and how
long it waits for the slaves and frameworks that were there before it.

As in Mesos: frameworks of the registry come back disconnected (their tasks keep running)
and are removed if they do not re-subscribe within their failover timeout (counted from
the failover, and never shorter than `slave_reregister_timeout`); slaves of the registry
are "recovering" until they re-register with their tasks, and those that do not within
`slave_reregister_timeout` are removed: every framework is told the slave is lost, and
reconciling a task on it answers TASK_LOST (reason: slave removed). The frameworks
removed before stay removed: refused if they subscribe again, and their tasks shut down
on the slaves that bring them back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from master.allocation.allocator import Allocator
from master.allocation.quota import Quota
from master.books import Books, Framework, Maintenance, Roles
from master.counters import SlaveChurn
from master.ha.registry import Registry, RemovedRecord
from protocol.transport.aio import loop_time

SlaveGone = Callable[..., None]  # the master's removal: (slave_id, why, *, cause=...)


class Recovery:
    """The new leader's side of a failover: the registry into the books, and the wait
    for the slaves it names. Constructed with what it reads and changes."""

    def __init__(
        self,
        books: Books,
        allocator: Allocator,
        registry: Registry,
        churn: SlaveChurn,
        log: Any,
        *,
        epoch: int,
        reregister_timeout: float,
        slave_gone: SlaveGone,
    ) -> None:
        """`reregister_timeout`: how long the registry's slaves have to come back."""
        self.books, self.allocator, self.registry = books, allocator, registry
        self.churn, self.log, self.epoch = churn, log, epoch
        self.reregister_timeout, self._slave_gone = reregister_timeout, slave_gone
        self._first_deadline = float("inf")  # the earliest of the recovering slaves'

    def recover(self) -> None:
        """Take the registry (already loaded) into the books; call before serving."""
        now = loop_time()
        for role, weight in self.registry.weights.items():  # operators' run-time weights
            try:
                self.allocator.roles.set_weight(role, weight.weight)
            except Exception as e:  # a role the roles file no longer has, say
                self.log.error("recovery.weight_refused", role=role, error=str(e))
        for role, quota in self.registry.quotas.items():
            try:
                if quota.guarantee or quota.limit is not None:
                    self.allocator.roles.set_quota(role, Quota(quota.guarantee, quota.limit))
                else:
                    self.allocator.roles.remove_quota(role)
            except Exception as e:  # a role the roles file no longer has, say
                self.log.error("recovery.quota_refused", role=role, error=str(e))
        grace = self.reregister_timeout
        for slave_id, slave in self.registry.slaves.items():
            self.books.slave_owners[slave_id] = slave.principal
            self.books.recovering[slave_id] = now + grace
        self.churn.recovery_expected = len(self.books.recovering)
        self._first_deadline = min(self.books.recovering.values(), default=float("inf"))
        for slave_id, kept in self.registry.maintenance.items():  # deactivated, draining
            self.books.maintenance[slave_id] = Maintenance(
                kept.drain, kept.max_grace_period, kept.mark_gone
            )
        for framework_id, removal in self.registry.removed.items():  # (oldest first)
            self.books.remember_removed(
                framework_id, removal.principal, removal.why, roles=_roles_of(removal)
            )
        for framework_id, record in self.registry.frameworks.items():
            if framework_id in self.books.removed:  # (its leader went before dropping it)
                continue
            roles = record.roles or [record.role]
            if any(self.allocator.roles.problem(role) is not None for role in roles):
                self.log.error("recovery.role_gone", framework_id=framework_id, roles=roles)
                continue
            fw = Framework(
                framework_id=framework_id,
                principal=record.principal,
                name=record.name,
                role=record.role,
                roles=record.roles,
                inbox="",
                incarnation="",
                failover_timeout=record.failover_timeout,
                registered_at=time.time(),
                connected=False,
                # its failover timeout runs from now, and is at least the slaves' grace
                disconnected_at=now + max(0.0, grace - record.failover_timeout),
            )
            self.books.add_framework(fw)
            self.allocator.add_framework(framework_id, record.role, roles=record.roles)
            self.allocator.deactivate(framework_id)
        self.log.info(
            "master.recovered",
            epoch=self.epoch,
            slaves=len(self.books.recovering),
            frameworks=len(self.registry.frameworks),
            removed=len(self.books.removed),
            quotas=len(self.registry.quotas),
            maintenance=len(self.books.maintenance),
            reregister_timeout=grace,
        )

    def expire_recovering(self, now: float) -> None:
        # (every deadline is the failover's: nothing to walk before it, four times a
        # second, while 100,000 slaves come back)
        if not self.books.recovering or now < self._first_deadline:
            return
        for slave_id, deadline in list(self.books.recovering.items()):
            if now >= deadline:
                self.slave_not_back(slave_id)
        self._first_deadline = min(self.books.recovering.values(), default=float("inf"))

    def slave_not_back(self, slave_id: str) -> None:
        del self.books.recovering[slave_id]
        timeout = self.reregister_timeout
        self.churn.recovery_removed += 1
        self.churn.recovered_one(len(self.books.recovering))
        self._slave_gone(
            slave_id, f"did not re-register within {timeout:g}s of the failover", cause="recovery"
        )


def _roles_of(removal: RemovedRecord) -> Roles | None:
    """A removed framework's roles, as its removal's record keeps them (None: an entry
    written before they were kept)."""
    if not removal.role:
        return None
    return Roles(removal.role, tuple(removal.roles) if removal.roles is not None else None)
