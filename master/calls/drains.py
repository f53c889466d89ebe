"""An operator takes a slave out of the offers and back (Mesos 1.9's DEACTIVATE_AGENT,
REACTIVATE_AGENT) or drains it for maintenance (DRAIN_AGENT), as Mesos's master does.

A deactivated slave is offered to no one (its outstanding offers rescinded); its tasks
run on. A draining one is deactivated too, and each of its tasks is killed with its own
grace, at most the drain's `max_grace_period`: its framework hears TASK_KILLED with
REASON_SLAVE_DRAINING (TASK_GONE_BY_OPERATOR if the drain marks the slave gone and the
framework is partition-aware). The slave is DRAINED once it has no task left and its
frameworks have acknowledged every update from it (or had `ack_wait` to, since nothing
ran there: a tenant that never acknowledges does not hold the operator's drain for
ever; what it is owed is still sent again), and nothing else runs there: no
orphan (a task of a framework not back yet, killed too) and no task of a removed
framework in its kill grace (held as dying, its grace cut to the drain's); then, if the
drain said so, it is marked gone. Everything here is written to the registry before it
is answered, so a new leader (and a slave that restarts, or comes back from out of
touch) carries on: kills are sent again to a draining slave each time it (re-)registers,
and to any task found on it that was not killed yet.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from master.allocation.allocator import Allocator
from master.authz import Caller
from master.books import DRAINED, DRAINING, Books, Maintenance, Slave
from master.ha.recorder import Recorder
from master.ha.registry import MaintenanceRecord
from master.offers import OfferBook
from master.outbox import Outbox
from master.removals import Removals
from protocol.transport.aio import loop_time
from protocol.wire.messages import (
    DeactivateSlave,
    DrainSlave,
    KillTask,
    ReactivateSlave,
    Reason,
    ShutdownFramework,
)


def record_of(m: Maintenance) -> MaintenanceRecord:
    grace, gone = m.max_grace_period, m.mark_gone
    return MaintenanceRecord(drain=m.drain, max_grace_period=grace, mark_gone=gone)


class Drains:
    """The three calls, and what follows them: kills sent, DRAINED, marked gone."""

    def __init__(
        self,
        books: Books,
        allocator: Allocator,
        offers: OfferBook,
        outbox: Outbox,
        recorder: Recorder,
        removals: Removals,
        *,
        request_round: Callable[[], None],
        ack_wait: float,
        log: Any,
    ) -> None:
        """`ack_wait`: how long, once nothing runs on a draining slave, updates from it
        that frameworks have not acknowledged keep it DRAINING, at most."""
        self.books, self.allocator, self.offers, self.outbox = books, allocator, offers, outbox
        self.recorder, self.removals = recorder, removals
        self.request_round, self.log, self.ack_wait = request_round, log, ack_wait

    # -- the operator's calls -----------------------------------------------------------------
    async def on_drain_slave(self, msg: DrainSlave, caller: Caller) -> None:
        slave_id = msg.slave_id
        if not self._known(slave_id, caller, "DrainSlave"):
            return
        drain = Maintenance(DRAINING, msg.max_grace_period, msg.mark_gone)
        if not await self.recorder.maintenance(slave_id, record_of(drain), caller, "DrainSlave"):
            return
        self.books.maintenance[slave_id] = drain  # (kills sent again, with this drain's cap)
        slave = self.books.slaves.get(slave_id)
        if slave is not None:
            self._take_out(slave)
        grace = "its tasks' own" if msg.max_grace_period is None else f"{msg.max_grace_period:g}s"
        detail = f"draining (grace: {grace}{', then marked gone' if msg.mark_gone else ''})"
        self.log.info(
            "slave.draining",
            slave_id=slave_id,
            by=caller.principal,
            max_grace_period=msg.max_grace_period,
            mark_gone=msg.mark_gone,
            tasks=len(slave.tasks) if slave is not None else None,
        )
        self.outbox.emit("slave-draining", slave_id=slave_id, detail=detail)
        self.check()

    async def on_deactivate_slave(self, msg: DeactivateSlave, caller: Caller) -> None:
        slave_id = msg.slave_id
        if not self._known(slave_id, caller, "DeactivateSlave"):
            return
        if slave_id not in self.books.maintenance:  # (draining or drained: already out)
            out = Maintenance()
            write = self.recorder.maintenance(slave_id, record_of(out), caller, "DeactivateSlave")
            if not await write:
                return
            self.books.maintenance[slave_id] = out
            slave = self.books.slaves.get(slave_id)
            if slave is not None:
                self._take_out(slave)
        self.log.info("slave.deactivated", slave_id=slave_id, by=caller.principal)
        self.outbox.emit("slave-deactivated", slave_id=slave_id, detail="deactivated")

    async def on_reactivate_slave(self, msg: ReactivateSlave, caller: Caller) -> None:
        slave_id = msg.slave_id
        out = self.books.maintenance.get(slave_id)
        if out is None:
            self.outbox.refuse(
                caller,
                f"slave {slave_id} is not deactivated",
                "not-deactivated",
                "ReactivateSlave",
                slave_id=slave_id,
            )
            return
        if out.drain == DRAINING:
            self.outbox.refuse(
                caller,
                f"slave {slave_id} is still DRAINING: it may be reactivated once DRAINED",
                "still-draining",
                "ReactivateSlave",
                slave_id=slave_id,
            )
            return
        if not await self.recorder.maintenance(slave_id, None, caller, "ReactivateSlave"):
            return
        self.books.maintenance.pop(slave_id, None)
        slave = self.books.slaves.get(slave_id)
        if slave is not None and slave.connected:
            self.allocator.activate_slave(slave_id)
            self.request_round()
        self.outbox.state_changed()
        self.log.info("slave.reactivated", slave_id=slave_id, by=caller.principal)
        self.outbox.emit("slave-reactivated", slave_id=slave_id, detail="reactivated")

    def _known(self, slave_id: str, caller: Caller, about: str) -> bool:
        """As Mesos: a slave registered, recovering after a failover, or unreachable."""
        books = self.books
        if slave_id in books.slaves or slave_id in books.recovering:
            return True
        if slave_id in books.removed_slaves:
            return True
        self.outbox.refuse(caller, f"unknown slave {slave_id}", "unknown-slave", about)
        return False

    # -- what follows -------------------------------------------------------------------------
    def _take_out(self, slave: Slave) -> None:
        """Offered to no one from now: its outstanding offers rescinded."""
        for offer_id in list(slave.offers):
            self.offers.rescind(self.books.offers[offer_id])
        self.allocator.deactivate_slave(slave.slave_id)
        self.outbox.state_changed()

    def slave_admitted(self, slave: Slave) -> None:
        """A slave (re-)registered: if an operator took it out, it stays out, and if it
        drains, every task it brought back is killed (again: it may have restarted)."""
        out = self.books.maintenance.get(slave.slave_id)
        if out is None:
            return
        self.allocator.deactivate_slave(slave.slave_id)
        out.killed.clear()
        self.check()

    def check(self) -> None:
        """Each draining slave: kill what is not being killed yet; DRAINED once nothing is
        left of it to wait for. Called after each change and on the master's timer (a
        task's end and its framework's acknowledgement come by many ways)."""
        for slave_id, out in list(self.books.maintenance.items()):
            slave = self.books.slaves.get(slave_id)
            if out.drain != DRAINING or slave is None or not slave.connected:
                self._owe_acks(out, 0)  # (gone, or away: it waits on the slave first)
                continue
            self._kill_the_rest(slave, out)
            self._kill_orphans(slave, out)
            self._cut_dying(slave, out)
            if slave.tasks or self._still_running(slave_id):
                out.quiet_since = None
                self._owe_acks(out, 0)
                continue
            now = loop_time()
            out.quiet_since = now if out.quiet_since is None else out.quiet_since
            owed = self._owed(slave_id)
            if owed and now - out.quiet_since < self.ack_wait:
                self._owe_acks(out, len(owed))
                continue
            self._owe_acks(out, 0)
            if owed:  # (still sent again to them until they acknowledge: no update lost)
                self.log.warning("slave.drain_acks_waited_out", slave_id=slave_id, owed=owed)
            self._drained(slave, out)

    def _owe_acks(self, out: Maintenance, frameworks: int) -> None:
        """What the state says a drain waits for: how many frameworks' acknowledgements."""
        if out.acks_owed != frameworks:
            out.acks_owed = frameworks
            self.outbox.state_changed()

    def _kill_the_rest(self, slave: Slave, out: Maintenance) -> None:
        for key in list(slave.tasks):
            if key in out.killed:
                continue
            out.killed.add(key)
            fw = self.books.frameworks.get(key[0])
            task = fw.tasks.get(key[1]) if fw is not None else None
            if fw is None or task is None or task.terminal:
                continue  # (ended on its slave: its last update is on its way)
            gone = out.mark_gone and fw.partition_aware
            self._drain_kill(slave, out, key, gone=gone, killing=fw.task_killing)

    def _kill_orphans(self, slave: Slave, out: Maintenance) -> None:
        """Tasks kept for a framework not back yet (out of `slave.tasks`): killed as the
        others (TASK_KILLED: whether their framework is partition-aware is not known)."""
        for orphan in self.books.orphans.on(slave.slave_id):
            key = (orphan.framework_id, orphan.task.task_id)
            if key in out.killed or orphan.state.terminal:
                continue
            out.killed.add(key)
            self._drain_kill(slave, out, key, orphan=True)

    def _drain_kill(
        self,
        slave: Slave,
        out: Maintenance,
        key: tuple[str, str],
        *,
        gone: bool = False,
        killing: bool = False,
        orphan: bool = False,
    ) -> None:
        """Kill a task (framework, task id) on a draining slave, its grace the drain's."""
        kill = KillTask(
            framework_id=key[0],
            task_id=key[1],
            reason=Reason.SLAVE_DRAINING,
            grace_cap=out.max_grace_period,
            gone=gone,
            killing=killing,
        )
        self.outbox.send_slave(slave.slave_id, kill)
        self.log.info(
            "slave.drain_kill", slave_id=slave.slave_id, framework_id=key[0], task_id=key[1],
            **({"orphan": True} if orphan else {}),
        )  # fmt: skip

    def _cut_dying(self, slave: Slave, out: Maintenance) -> None:
        """A removed framework's tasks in their kill grace there: their grace cut to the
        drain's (ShutdownFramework again, with the cap), as its own tasks' are."""
        if out.max_grace_period is None:
            return  # (each task's own grace: theirs already)
        for framework_id in self.books.dying.on(slave.slave_id):
            key = (framework_id, "")  # (the framework's shutdown, not one task's kill)
            if key in out.killed:
                continue
            out.killed.add(key)
            cut = ShutdownFramework(framework_id=framework_id, grace_cap=out.max_grace_period)
            self.outbox.send_slave(slave.slave_id, cut)

    def _still_running(self, slave_id: str) -> bool:
        """Whether an orphan, or a removed framework's task in its kill grace, still runs
        on the slave (neither is in `slave.tasks`)."""
        if self.books.dying.on(slave_id):
            return True
        return any(not o.state.terminal for o in self.books.orphans.on(slave_id))

    def _owed(self, slave_id: str) -> list[str]:
        """The frameworks that have still to acknowledge an update from this slave."""
        return [
            fw.framework_id
            for fw in self.books.frameworks.values()
            if any(p.slave_id == slave_id for p in fw.pending.values())
        ]

    def _drained(self, slave: Slave, out: Maintenance) -> None:
        slave_id = slave.slave_id
        out.drain = DRAINED
        self.log.info("slave.drained", slave_id=slave_id, mark_gone=out.mark_gone)
        self.outbox.emit("slave-drained", slave_id=slave_id, detail="drained")
        self.outbox.state_changed()
        if out.mark_gone:  # (no need to write DRAINED first: gone says more)
            why = "drained, and marked gone as its drain said"
            self.removals.remove_slave(slave, why, gone=True)
            self.outbox.emit("slave-gone", slave_id=slave_id, detail=why)
        else:
            self.recorder.drained(slave_id, record_of(out))
