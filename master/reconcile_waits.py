"""Explicit reconciliation asks a new leader cannot answer yet, kept until it can.

After a failover a task on a slave that has not re-registered has no answer (Mesos's
_reconcileTasks: the framework is to ask again later), and a framework asks again after a
few seconds, longer the more tasks it asks about: the last slave's tasks waited up to 8 s
after it was back for the ask that answered them. So the asks are kept here, by slave, and
answered as the slave re-registers or is removed (the framework may still ask again: an
answer twice is what reconciliation is).

Bounded for each principal, not each framework: a framework may ask about any task id on
any recovering slave, and a principal may register many frameworks. Past MAX_WAITING of
its principal's, an ask is not kept, and the framework's own retry answers it, as Mesos
would have it; one principal at its bound takes nothing of another's room.
"""

from __future__ import annotations

MAX_WAITING = 250_000  # asks kept for one principal (a benchmark's framework: 100,000 tasks)


class ReconcileWaits:
    def __init__(self) -> None:
        self._by_slave: dict[str, dict[str, set[str]]] = {}  # slave -> framework -> tasks
        self._kept: dict[str, int] = {}  # asks kept, by framework
        self._principal: dict[str, str] = {}  # each framework with asks kept: its principal
        self._by_principal: dict[str, int] = {}  # asks kept, by principal

    def __len__(self) -> int:
        return sum(self._kept.values())

    def kept_for(self, principal: str) -> int:
        return self._by_principal.get(principal, 0)

    def keep(self, slave_id: str, framework_id: str, principal: str, task_id: str) -> None:
        """An ask of `principal`'s framework about `task_id` on the recovering
        `slave_id`, answered when it is back."""
        if self._by_principal.get(principal, 0) >= MAX_WAITING:
            return  # (nothing made for it: a set kept empty would outlive the count)
        tasks = self._by_slave.setdefault(slave_id, {}).setdefault(framework_id, set())
        if task_id in tasks:
            return
        tasks.add(task_id)
        self._kept[framework_id] = self._kept.get(framework_id, 0) + 1
        self._principal[framework_id] = principal
        self._by_principal[principal] = self._by_principal.get(principal, 0) + 1

    def take(self, slave_id: str) -> dict[str, set[str]]:
        """The asks about the slave's tasks, by framework (no longer kept)."""
        asks = self._by_slave.pop(slave_id, {})
        for framework_id, tasks in asks.items():
            self._count_off(framework_id, len(tasks))
        return asks

    def forget(self, framework_id: str) -> None:
        """The framework is gone: its asks are answered to nobody."""
        kept = self._kept.get(framework_id)
        if kept is None:
            return
        self._count_off(framework_id, kept)
        for slave_id in list(self._by_slave):
            asks = self._by_slave[slave_id]
            asks.pop(framework_id, None)
            if not asks:
                del self._by_slave[slave_id]

    def _count_off(self, framework_id: str, n: int) -> None:
        """`n` of the framework's asks are no longer kept."""
        left = self._kept[framework_id] - n
        principal = self._principal[framework_id]
        of_principal = self._by_principal[principal] - n
        if left:
            self._kept[framework_id] = left
        else:
            del self._kept[framework_id], self._principal[framework_id]
        if of_principal:
            self._by_principal[principal] = of_principal
        else:
            del self._by_principal[principal]
