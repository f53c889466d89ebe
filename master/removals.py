"""Frameworks and slaves leaving: a framework disconnected (its failover timeout runs) or
removed (its tasks killed, everything it holds back to the pool), a slave removed as
unreachable or marked gone by an operator (its tasks' frameworks told), as Mesos 1.x."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from master.allocation.allocator import Allocator, AllocatorError
from master.books import Books, Framework, Slave
from master.counters import SlaveChurn
from master.dying import ByRole, charge, held_for
from master.ha.recorder import Recorder
from master.listeners import Listeners
from master.offers import OfferBook
from master.orphans import Orphan
from master.outbox import Outbox
from master.updates import TaskUpdates
from protocol.transport.aio import loop_time
from protocol.wire.discrete import Discrete
from protocol.wire.messages import (
    Error,
    Failure,
    Reason,
    RunningTask,
    ShutdownFramework,
    TaskState,
)
from protocol.wire.resources import Resources


class Removals:
    def __init__(
        self,
        books: Books,
        allocator: Allocator,
        offers: OfferBook,
        updates: TaskUpdates,
        outbox: Outbox,
        recorder: Recorder,
        *,
        listeners: Listeners,
        churn: SlaveChurn,
        request_round: Callable[[], None],
        log: Any,
        max_failover: float | None = None,
    ) -> None:
        """`listeners`: told of each framework gone; `churn`: slaves disconnected and
        removed are counted; `max_failover`: the most failover timeout (None: none), which
        a framework known only by its orphans is given to come back, too."""
        self.books, self.allocator, self.offers, self.updates = books, allocator, offers, updates
        self.outbox, self.recorder, self.listeners, self.churn = outbox, recorder, listeners, churn
        self.request_round, self.log, self.max_failover = request_round, log, max_failover

    # -- frameworks --------------------------------------------------------------------------
    def disconnect_framework(self, fw: Framework, why: str) -> None:
        """Its connection is gone: offered nothing, its offers rescinded, and removed if it
        is not back within its failover timeout (at once if it has none)."""
        if not fw.connected:
            return
        fw.connected = False
        fw.disconnected_at = loop_time()
        self.allocator.deactivate(fw.framework_id)
        for offer_id in list(fw.offers):
            self.offers.rescind(self.books.offers[offer_id])
        self.log.info(
            "framework.disconnected",
            framework_id=fw.framework_id,
            why=why,
            failover_timeout=fw.failover_timeout,
        )
        self.outbox.emit("disconnected", framework_id=fw.framework_id, detail=why)
        if fw.failover_timeout <= 0:
            self.remove_framework(fw, "disconnected with no failover timeout")
        self.request_round()

    def remove_framework(self, fw: Framework, why: str) -> None:
        """Tell it, kill its tasks, give back everything it holds, and forget it."""
        if fw.connected:  # as Mesos: ERROR "Framework has been removed"
            self.outbox.send_framework(
                fw,
                Error(
                    message=f"Framework has been removed: {why}",
                    code="framework-removed",
                    about=fw.framework_id,
                ),
            )
        for offer_id in list(fw.offers):
            self.offers.rescind(self.books.offers[offer_id], recover=False)
        slaves: set[str] = set(fw.slaves_used)  # its executors may outlive its tasks
        dying: dict[str, ByRole] = {}  # by slave: what its tasks use until they end
        values: dict[str, list[Discrete]] = {}  # ... and the ports they are bound to
        graces: dict[str, list[float]] = {}  # ... and the kill graces they asked for
        for task in fw.tasks.values():
            slaves.add(task.slave_id)
            slave = self.books.slaves.get(task.slave_id)
            if slave is not None:
                slave.tasks.discard((fw.framework_id, task.task_id))
            if slave is not None and not task.terminal:  # (an ended one holds nothing)
                charge(
                    dying.setdefault(task.slave_id, {}),
                    fw.task_role(task.info),
                    task.info.resources,
                )
                if task.info.discrete:
                    values.setdefault(task.slave_id, []).append(task.info.discrete)
                if task.info.kill_policy is not None:
                    graces.setdefault(task.slave_id, []).append(task.info.kill_policy.grace_period)
        for (slave_id, executor_id), resources in fw.executors.items():
            if slave_id in self.books.slaves:  # (an executor's: the role it was launched in)
                role = fw.executor_roles.get((slave_id, executor_id), fw.all_roles()[0])
                charge(dying.setdefault(slave_id, {}), role, resources)
        for slave_id in slaves:
            if slave_id in self.books.slaves:
                self.outbox.send_slave(slave_id, ShutdownFramework(framework_id=fw.framework_id))
        self.allocator.remove_framework(fw.framework_id)  # releases tasks and offers alike
        self._hold_dying(fw.framework_id, dying, values, graces)
        killed = len(fw.tasks)
        self.books.forget_framework(fw, why)
        self.recorder.forget_framework(fw.framework_id, fw.principal, why, fw.role, fw.roles)
        self._shut_down_orphans(fw.framework_id)  # (those a slave said were another's)
        self.listeners.tell_framework_gone(fw.framework_id)
        self.log.info(
            "framework.removed", framework_id=fw.framework_id, why=why, tasks_killed=killed
        )
        self.outbox.emit("removed", framework_id=fw.framework_id, detail=why)
        self.request_round()

    def remove_orphans(self, framework_id: str, why: str) -> None:
        """An operator tears down a framework this master knows only by the tasks slaves
        brought back for it (a master restarted without its registry, the framework not
        back): shut down where they run, what they held free, and the id removed."""
        owners = self.books.orphans.owners(framework_id)
        principal = next(iter(owners)) if len(owners) == 1 else ""
        killed = self._shut_down_orphans(framework_id)
        self.books.remember_removed(framework_id, principal, why)
        self.recorder.forget_framework(framework_id, principal, why)
        self.log.info("framework.removed", framework_id=framework_id, why=why, orphans=killed)
        self.outbox.emit("removed", framework_id=framework_id, detail=why)
        self.request_round()

    def _hold_dying(
        self,
        framework_id: str,
        dying: dict[str, ByRole],
        values: dict[str, list[Discrete]],
        graces: dict[str, list[float]],
    ) -> None:
        """What a removed framework's tasks use, and the ports they are bound to, are held
        by nobody until their slave says they have ended (`master.dying`): their kill
        grace may be a minute. It counts in their roles' shares meanwhile."""
        now = loop_time()
        for slave_id, by_role in dying.items():
            bound = Discrete.union(values.get(slave_id, ()))
            hold_for = held_for(graces.get(slave_id, ()))
            self._hold(slave_id, framework_id, by_role, bound, now, hold_for)

    def _hold(
        self,
        slave_id: str,
        framework_id: str,
        by_role: ByRole,
        bound: Discrete,
        now: float,
        hold_for: float | None = None,
    ) -> None:
        """Hold what `by_role` says (and the values `bound`) of the slave by nobody, as
        dying, each part counted in its role's share."""
        held: ByRole = {}
        for role, used in by_role.items():
            if not used:
                continue
            try:
                self.allocator.hold_unowned(slave_id, used, role)
            except AllocatorError as e:  # (its room was given out meanwhile: not held)
                self.log.warning("framework.dying_not_held", slave_id=slave_id, error=str(e))
                continue
            held[role] = used
        if held:
            self.books.dying.add(slave_id, framework_id, held, now, bound, hold_for)

    def _free_dying(self, slave_id: str, held: ByRole) -> None:
        if slave_id in self.allocator.slaves:  # (a slave removed took its holds with it)
            for role, resources in held.items():
                self.allocator.release_unowned(slave_id, resources, role)
            self.request_round()

    def hold_dying_again(self, slave_id: str, framework_id: str, tasks: list[RunningTask]) -> None:
        """A slave back names tasks of a framework removed while it was away, and is told
        again to shut it down: they are held as dying from now (their hold may have
        lapsed while the slave was away, or there was none: the slave was removed)."""
        now = loop_time()
        if self.books.dying.renew(slave_id, framework_id, now):
            return
        # each in its role, as its removal keeps them (the registry's record, after a
        # failover); a removal that kept none (orphans torn down), nobody's
        roles = self.books.removed_roles.get(framework_id)
        by_role: ByRole = {}
        executors: set[str] = set()
        for r in tasks:
            role = roles.of(r.task) if roles is not None else ""
            charge(by_role, role, r.task.resources)
            executor = r.task.executor
            if executor is not None and executor.executor_id not in executors:
                executors.add(executor.executor_id)
                charge(by_role, role, executor.resources)
        if any(by_role.values()):
            bound = Discrete.union(r.task.discrete for r in tasks if r.task.discrete)
            graces = (r.task.kill_policy.grace_period for r in tasks if r.task.kill_policy)
            self._hold(slave_id, framework_id, by_role, bound, now, held_for(graces))

    def release_dying(self, slave_id: str, framework_id: str) -> bool:
        """The slave says the framework's tasks there have ended: what they used is free
        (True if anything was held)."""
        held = self.books.dying.take(slave_id, framework_id)
        if held is not None:
            self._free_dying(slave_id, held)
        return held is not None

    def _shut_down_orphans(self, framework_id: str) -> int:
        """Its tasks held by nobody: shut down on their slaves, what they held still held
        (by nobody) until their slave says they have ended (`master.dying`)."""
        orphans = self.books.orphans.take(framework_id)
        now, by_slave = loop_time(), dict[str, list[Orphan]]()
        for orphan in orphans:
            by_slave.setdefault(orphan.slave_id, []).append(orphan)
        idle: dict[str, Resources] = {}  # (its idle executors' rooms, by slave)
        for executor in self.books.orphans.executors_of(framework_id):
            self.books.orphans.remove_executor(executor)
            idle[executor.slave_id] = idle.get(executor.slave_id, Resources()) + (
                executor.resources
            )
            by_slave.setdefault(executor.slave_id, [])
        for slave_id, theirs in by_slave.items():
            held = sum((o.held for o in theirs), idle.get(slave_id, Resources()))
            bound = Discrete.union(o.task.discrete for o in theirs if o.task.discrete)
            self.books.dying.add(slave_id, framework_id, {"": held}, now, bound)
            self.outbox.send_slave(slave_id, ShutdownFramework(framework_id=framework_id))
        return len(orphans)

    def expire_frameworks(self, now: float) -> None:
        """Those disconnected past their failover timeout are removed; so is a framework
        known only by its orphans, not back within the most failover timeout of their
        coming back (its own is not known: a master restarted without its registry)."""
        for fw in list(self.books.frameworks.values()):
            if (
                not fw.connected
                and fw.disconnected_at is not None
                and now - fw.disconnected_at > fw.failover_timeout
            ):
                self.remove_framework(fw, f"failover timeout {fw.failover_timeout}s passed")
        if self.books.dying:
            for slave_id, framework_id, held in self.books.dying.overdue(now):
                self.log.warning(
                    "framework.dying_overdue", slave_id=slave_id, framework_id=framework_id
                )
                self._free_dying(slave_id, held)
        if self.max_failover is not None and self.books.orphans:
            frameworks = self.books.frameworks
            for framework_id in self.books.orphans.since(now - self.max_failover):
                if framework_id not in frameworks:  # (a framework's own timer is above)
                    why = f"not back within the most failover timeout {self.max_failover:g}s"
                    self.remove_orphans(framework_id, why)

    # -- slaves ------------------------------------------------------------------------------
    def disconnect_slave(self, slave: Slave, why: str) -> None:
        """As Mesos: a slave whose connection is gone keeps its tasks (a restarted slave
        recovers them) but is offered to nobody; it is removed only if it stays away for
        the slave timeout."""
        if not slave.connected:
            return
        slave.connected = False
        self.churn.disconnects += 1
        for offer_id in list(slave.offers):
            self.offers.rescind(self.books.offers[offer_id])
        self.allocator.deactivate_slave(slave.slave_id)
        self.log.warning("slave.disconnected", slave_id=slave.slave_id, why=why)
        self.outbox.emit("slave-disconnected", slave_id=slave.slave_id, detail=why)

    def rescind_offers(self, slave: Slave) -> None:
        """A slave back on a new connection (restarted, or reconnected without a word the
        master heard): its outstanding offers taken back, as Mesos's master does when an
        agent re-registers, for its resources or executors may have changed; a round
        offers them again (an offer made before the restart, and never answered, held the
        slave from its frameworks until then)."""
        for offer_id in list(slave.offers):
            self.offers.rescind(self.books.offers[offer_id])
        self.request_round()

    def remove_slave(self, slave: Slave, why: str, *, gone: bool = False) -> None:
        """As Mesos 1.x: a slave out of touch past its timeout is unreachable, its tasks
        TASK_UNREACHABLE (they may still run, and come back with it); one an operator
        marked `gone` ends its tasks TASK_GONE_BY_OPERATOR. Frameworks not partition-aware
        hear TASK_LOST either way (reason: slave removed)."""
        for offer_id in list(slave.offers):
            self.offers.rescind(self.books.offers[offer_id], recover=False)
        state, reason = (
            (TaskState.GONE_BY_OPERATOR, Reason.SLAVE_REMOVED_BY_OPERATOR)
            if gone
            else (TaskState.UNREACHABLE, Reason.SLAVE_REMOVED)
        )
        affected: set[str] = set()
        for framework_id, task_id in list(slave.tasks):
            fw = self.books.frameworks.get(framework_id)
            if fw is None:
                continue
            affected.add(framework_id)
            self.updates.from_master(
                fw, task_id, slave.slave_id, state, reason, f"slave {slave.slave_id} removed: {why}"
            )
            task = fw.tasks.get(task_id)
            if task is not None and task.state == TaskState.UNREACHABLE:
                del fw.tasks[task_id]  # out of the books until its slave is back
                fw.unreachable[task_id] = task
        self.books.orphans.drop_slave(slave.slave_id)
        self.books.dying.drop_slave(slave.slave_id)
        self.allocator.remove_slave(slave.slave_id)
        for fw in self.books.frameworks.values():  # its executors went with it
            for eid in list(fw.executors_on.get(slave.slave_id, ())):
                fw.forget_executor((slave.slave_id, eid))
        del self.books.slaves[slave.slave_id]
        cause = "operator" if gone else "unreachable"
        self.slave_removed(
            slave.slave_id, why, gone=gone, cause=cause, frameworks_affected=len(affected)
        )
        self.request_round()

    def slave_removed(
        self, slave_id: str, why: str, *, gone: bool = False, cause: str = "", **fields: Any
    ) -> None:
        """A slave is removed (timed out, not back after a failover, or marked gone): out
        of the registry, every framework told it is lost, and reconciling a task there
        answers TASK_UNREACHABLE (or TASK_GONE_BY_OPERATOR; TASK_LOST to frameworks not
        partition-aware) from now on (no update of its can still be on the way)."""
        if gone:
            self.books.removed_slaves.discard(slave_id)
            self.books.gone_slaves.add(slave_id)
            if self.books.maintenance.pop(slave_id, None) is not None:  # (as Mesos forgets
                self.recorder.forget_maintenance(slave_id)  # a gone agent's drain)
        else:
            self.books.removed_slaves.add(slave_id)
        self.books.slave_ending(slave_id, set())
        self.listeners.tell_slave_removed(slave_id)
        self.churn.removals[cause or ("operator" if gone else "unreachable")] += 1
        self.recorder.forget_slave(slave_id)
        for fw in self.books.frameworks.values():
            if fw.connected:
                self.outbox.send_framework(fw, Failure(slave_id=slave_id))
        self.log.warning("slave.removed", slave_id=slave_id, why=why, **fields)
        self.outbox.emit("slave-removed", slave_id=slave_id, detail=why)
