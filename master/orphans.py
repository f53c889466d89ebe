"""Orphans: tasks a re-registering slave runs for a framework the master does not have
(yet), or for one the slave says is another principal's than the books do; and idle
executors (their tasks all ended, the executor running on) and task groups' executors it
names for such a framework.

What they use is held by nobody (`Allocator.hold_unowned`) until their framework's
principal subscribes and takes them (`Subscriptions._adopt_orphans`), an operator tears
that framework down, the most failover timeout passes (when the master has one) since
its first orphan came back, their slave no longer names them, or their slave is removed. They
are kept by framework and by slave, so that each of those touches only its own: after a
master restarted without its registry, every task of the fleet may be an orphan for a
while, and each re-registration, offer and subscribe must not walk them all.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from protocol.wire.messages import TaskInfo, TaskState
from protocol.wire.resources import Resources

# an orphan's principal when its slave could not prove the task was launched there: held,
# never adopted (no principal's name holds a NUL)
UNPROVEN = "\0unproven"

Key = tuple[str, str]  # (slave id, task id) within a framework; (framework id, task id) on a slave


@dataclass(frozen=True, slots=True)
class Orphan:
    task: TaskInfo
    framework_id: str
    slave_id: str
    state: TaskState
    held: Resources  # what the allocator holds for it, owned by nobody (its executor's too)
    principal: str | None = None  # its framework's, as its slave reports it (None: unsaid)
    healthy: bool | None = None  # its health check's latest verdict, as its slave says it
    holds_executor: bool = False  # `held` has its executor's resources (one orphan's each)

    @property
    def executor(self) -> tuple[str, str] | None:
        """(slave id, executor id) of the executor it runs in, if it names one."""
        executor = self.task.executor
        return (self.slave_id, executor.executor_id) if executor is not None else None


@dataclass(frozen=True, slots=True)
class OrphanExecutor:
    """An executor a slave runs that no task shows (with no task, or a task group's), for
    a framework the master does not have: its resources held by nobody until the
    framework takes it, or it exits."""

    framework_id: str
    slave_id: str
    executor_id: str
    resources: Resources
    principal: str | None = None  # its framework's, as its slave reports it
    group: bool = False  # a task group's executor (the slave plays it)

    @property
    def key(self) -> tuple[str, str]:
        """(slave id, executor id), as a framework's `executors` are keyed."""
        return (self.slave_id, self.executor_id)


class Orphans:
    def __init__(self) -> None:
        self._of: dict[str, dict[Key, Orphan]] = {}  # framework id: (slave, task): its orphan
        self._on: dict[str, dict[Key, Orphan]] = {}  # slave id: (framework, task): its orphan
        self._since: dict[str, float] = {}  # framework id: when its first orphan came back
        # framework id: (slave, executor id): its idle executor (a few: no index by slave)
        self._executors: dict[str, dict[Key, OrphanExecutor]] = {}

    def __bool__(self) -> bool:
        return bool(self._of) or bool(self._executors)

    def __iter__(self) -> Iterator[Orphan]:
        for orphans in self._of.values():
            yield from orphans.values()

    def frameworks(self) -> list[str]:
        """The framework ids that have orphans (tasks or idle executors)."""
        return list(self._since)

    def of(self, framework_id: str) -> list[Orphan]:
        return list(self._of.get(framework_id, {}).values())

    def on(self, slave_id: str) -> list[Orphan]:
        return list(self._on.get(slave_id, {}).values())

    def has(self, framework_id: str, slave_id: str, task_id: str) -> bool:
        return (slave_id, task_id) in self._of.get(framework_id, {})

    def get(self, framework_id: str, slave_id: str, task_id: str) -> Orphan | None:
        return self._of.get(framework_id, {}).get((slave_id, task_id))

    def in_executor(self, framework_id: str, executor: tuple[str, str]) -> list[Orphan]:
        """The framework's orphans that run in that executor ((slave id, executor id))."""
        return [
            o
            for o in self._on.get(executor[0], {}).values()
            if o.framework_id == framework_id and o.executor == executor
        ]

    def owners(self, framework_id: str) -> set[str]:
        """Whose the slaves say a framework's orphaned tasks are."""
        said = [o.principal for o in self._of.get(framework_id, {}).values()]
        said += [e.principal for e in self._executors.get(framework_id, {}).values()]
        return {p for p in said if p and p != UNPROVEN}

    def since(self, before: float) -> list[str]:
        """The frameworks whose first orphan (of those kept now) came back by `before`."""
        return [f for f, at in self._since.items() if at <= before]

    def add(self, orphan: Orphan, now: float) -> None:
        self._since.setdefault(orphan.framework_id, now)
        self._of.setdefault(orphan.framework_id, {})[orphan.slave_id, orphan.task.task_id] = orphan
        self._on.setdefault(orphan.slave_id, {})[orphan.framework_id, orphan.task.task_id] = orphan

    def remove(self, orphan: Orphan) -> None:
        of = self._of[orphan.framework_id]
        del of[orphan.slave_id, orphan.task.task_id]
        if not of:
            del self._of[orphan.framework_id]
            self._forget(orphan.framework_id)
        on = self._on[orphan.slave_id]
        del on[orphan.framework_id, orphan.task.task_id]
        if not on:
            del self._on[orphan.slave_id]

    def replace(self, old: Orphan, new: Orphan) -> None:
        """`new` in `old`'s place (the same task), its framework's first return kept."""
        key = (old.slave_id, old.task.task_id)
        self._of[old.framework_id][key] = new
        self._on[old.slave_id][old.framework_id, old.task.task_id] = new

    def take(self, framework_id: str) -> list[Orphan]:
        """A framework's orphans, no longer kept (put back those not taken: `add`)."""
        taken = self.of(framework_id)
        for orphan in taken:
            self.remove(orphan)
        return taken

    def drop_slave(self, slave_id: str) -> None:
        """Its slave removed: its orphans go with it (the allocator drops the slave)."""
        for orphan in self.on(slave_id):
            self.remove(orphan)
        for executor in self.executors_on(slave_id):
            self.remove_executor(executor)

    # -- idle executors ------------------------------------------------------------------
    def add_executor(self, executor: OrphanExecutor, now: float) -> None:
        self._since.setdefault(executor.framework_id, now)
        self._executors.setdefault(executor.framework_id, {})[executor.key] = executor

    def executor(self, framework_id: str, key: Key) -> OrphanExecutor | None:
        """The framework's idle executor at (slave id, executor id), if one is kept."""
        return self._executors.get(framework_id, {}).get(key)

    def executors_of(self, framework_id: str) -> list[OrphanExecutor]:
        return list(self._executors.get(framework_id, {}).values())

    def executors_on(self, slave_id: str) -> list[OrphanExecutor]:
        return [e for of in self._executors.values() for e in of.values() if e.slave_id == slave_id]

    def remove_executor(self, executor: OrphanExecutor) -> None:
        of = self._executors[executor.framework_id]
        del of[executor.key]
        if not of:
            del self._executors[executor.framework_id]
            self._forget(executor.framework_id)

    def _forget(self, framework_id: str) -> None:
        """Its first return forgotten once nothing of it is kept."""
        if framework_id not in self._of and framework_id not in self._executors:
            del self._since[framework_id]
