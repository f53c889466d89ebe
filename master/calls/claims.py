"""Whose a framework id is, when a framework subscribes naming one, and the tasks that go
with it.

The master's books say whose each framework it knows is. One it does not know (a master
restarted without its registry) is the subscribing principal's if the id carries proof
that the cluster gave it to that principal (master.framework_ids) and no slave says the
framework's tasks are another principal's (`Reregister.owners`); the tasks slaves
brought back before their framework did (orphans) then go to it, but for those a slave
says are another's. Every other claim, to another principal's framework or to an id
nobody has, is answered alike: no principal learns which ids exist.
"""

from __future__ import annotations

from master.authz import Caller
from master.books import Framework, Task
from master.shell import MasterShell


class FrameworkClaims:
    """Constructed with the shell whose books and framework ids it reads."""

    def __init__(self, shell: MasterShell) -> None:
        self.shell = shell

    def problem(self, framework_id: str, caller: Caller) -> tuple[str, str] | None:
        """(code, why) if `caller` may not subscribe as `framework_id` (None: it may)."""
        books, principal = self.shell.books, caller.principal
        fw = books.frameworks.get(framework_id)
        removed = books.removed.get(framework_id)
        if fw is not None:
            mine = fw.principal == principal
        elif removed is not None:
            if removed[0] == principal:
                return "framework-removed", f"Framework has been removed: {removed[1]}"
            mine = False
        else:  # unknown here (a master without its books): the id's proof, the slaves' word
            mine = self.shell.framework_ids.given_to(framework_id, principal) and (
                books.orphan_owners(framework_id) <= {principal}
            )
        if mine:
            return None
        return "subscribe-refused", (
            f"unknown framework {framework_id}: none of principal {principal}'s (subscribe "
            "without a framework id to register a new one)"
        )

    def adopt_orphans(self, fw: Framework) -> None:
        """Its tasks that slaves brought back before it did; those a slave says are another
        principal's stay orphans (SlaveCalls._reconcile_slave keeps them)."""
        kept = []
        for orphan in self.shell.books.orphans.pop(fw.framework_id, []):
            slave = self.shell.books.slaves.get(orphan.slave_id)
            if orphan.principal not in (None, fw.principal):
                kept.append(orphan)
            elif slave is not None:
                task = Task(orphan.task, fw.framework_id, orphan.slave_id, orphan.state)
                fw.tasks[task.task_id] = task
                fw.slaves_used.add(orphan.slave_id)
                slave.tasks.add((fw.framework_id, task.task_id))
                self.shell.allocator.adopt(fw.framework_id, orphan.slave_id, orphan.held)
                executor = orphan.task.executor  # (held with its first task, and now its)
                if executor is not None:
                    key = (orphan.slave_id, executor.executor_id)
                    fw.executors.setdefault(key, executor.resources)
                self.shell.task_changed(task, added=True)
        if kept:
            self.shell.books.orphans[fw.framework_id] = kept
