"""What the master does with the executors a (re-)registering slave names that no task of
it shows (idle custom executors, task groups' executors), and with those it books or
holds there that the slave no longer names (`master.calls.slave_calls`'s reconciliation
of a slave back)."""

from __future__ import annotations

import itertools

from master.allocation.allocator import Allocator
from master.books import Books, Slave
from master.calls.executors_shown import Unshown, executors_of
from master.orphans import OrphanExecutor
from master.outbox import Outbox
from protocol.transport.aio import loop_time
from protocol.wire.messages import ShutdownFramework
from protocol.wire.slave import MAX_EXECUTORS_CHECKED, CheckExecutors, RunningTask


class ExecutorsBack:
    def __init__(self, books: Books, allocator: Allocator, outbox: Outbox) -> None:
        self.books, self.allocator, self.outbox = books, allocator, outbox
        self._asks = itertools.count(1)  # CheckExecutors' numbers (their answers carry them)

    def booked(self, slave: Slave, idle: list[Unshown], owners: dict[str, str]) -> None:
        """Executors a (re-)registering slave runs that no task of it shows (Mesos's
        agent names them in `executor_infos`): custom ones with no task, and task groups'
        executors. Their room is used: booked to their framework as at their first task's
        launch (once: one it holds already is not booked again), or held by nobody until
        it comes (a new leader's case)."""
        sid = slave.slave_id
        for e in idle:
            key = (sid, e.executor_id)
            fw = self.books.frameworks.get(e.framework_id)
            said = owners.get(e.framework_id)  # whose the slave says it is
            if fw is not None and said in (None, fw.principal):
                role = fw.all_roles()[0] if fw.roles is not None else None
                if fw.keeps_executor(key, e.resources, role):
                    if e.group:  # (a group may join it; a task may not name it)
                        fw.group_executors.add(key)
                    fw.slaves_used.add(sid)
                    self.allocator.allocate_existing(fw.framework_id, sid, e.resources, role)
            elif e.framework_id in self.books.removed:  # (torn down while it was away)
                self.outbox.send_slave(sid, ShutdownFramework(framework_id=e.framework_id))
            elif self.books.orphans.executor(e.framework_id, key) is None:
                orphan = OrphanExecutor(
                    e.framework_id, sid, e.executor_id, e.resources, said, group=e.group
                )
                self.books.orphans.add_executor(orphan, loop_time())
                self.allocator.hold_unowned(sid, e.resources)

    def check_unnamed(self, slave_id: str, idle: list[Unshown], running: list[RunningTask]) -> None:
        """Executors this master books on a slave back to it that the slave names nowhere
        (neither idle nor under a task it runs): an executor's end is told after it is
        written (a custom executor's exit, a group's last task's end), and a slave that
        died between the two comes back without it, which kept its resources booked --
        an idle custom executor's for ever -- and dropped every later group naming a
        group's (review86). Each is asked after behind any launch sent there before
        (CheckExecutors, on the slave's ordered topic): one the slave then does not run
        is answered ended, and freed as any executor that ends. Not at a new leader's
        (it books only the executors slaves name)."""
        named = set(executors_of(running))  # (fw, executor): under a task, or idle
        named.update((e.framework_id, e.executor_id) for e in idle)
        for fw in self.books.frameworks.values():
            fid = fw.framework_id
            here = fw.executors_on.get(slave_id, ())
            eids = sorted(e for e in here if (fid, e) not in named)
            for start in range(0, len(eids), MAX_EXECUTORS_CHECKED):
                some = eids[start : start + MAX_EXECUTORS_CHECKED]
                ask = next(self._asks)
                fw.executor_checks.update(((slave_id, e), ask) for e in some)
                self.outbox.send_slave(
                    slave_id, CheckExecutors(framework_id=fid, executor_ids=some, ask=ask)
                )

    def not_named(self, slave_id: str, idle: list[Unshown]) -> None:
        """Executors held for a framework not here that the slave no longer names (they
        exited meanwhile): what they held is free again."""
        named = {(e.framework_id, (slave_id, e.executor_id)) for e in idle}
        for orphan in self.books.orphans.executors_on(slave_id):
            if (orphan.framework_id, orphan.key) not in named:
                self.books.orphans.remove_executor(orphan)
                self.allocator.release_unowned(slave_id, orphan.resources)
