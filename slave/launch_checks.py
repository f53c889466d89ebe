"""What a slave checks of every task it is told to run, alone or in a task group, before
it books it: what a master should never send, refused here too (TASK_ERROR, saying
why), since the slave runs a tenant's code on the master's word alone."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from protocol.wire.discrete import Discrete
from protocol.wire.ids import task_problem
from protocol.wire.messages import RunTask, TaskInfo
from slave.config import TaskRecord
from slave.executors import ExecutorProcess
from slave.owners import Owners


class LaunchChecks:
    def __init__(
        self,
        discrete: Discrete,
        tasks: Mapping[tuple[str, str], TaskRecord],
        executors: Mapping[tuple[str, str], ExecutorProcess],
        owners: Owners,
        image_problem: Callable[[str, TaskInfo], str | None],
    ) -> None:
        """`discrete`: the slave's ports (and other ranges and sets); `tasks`, `executors`
        and `owners`: its books, read in place; `image_problem`: a container image's."""
        self.discrete, self.tasks, self.executors = discrete, tasks, executors
        self.owners, self.image_problem = owners, image_problem

    def __call__(self, msg: RunTask) -> str | None:
        """Why the slave runs no such task (None: it may)."""
        task = msg.task
        return (
            task_problem(task)
            or self.values_problem(task)
            or self.owner_problem(msg)
            or self.image_problem(msg.framework_id, task)
        )

    def values_problem(self, task: TaskInfo) -> str | None:
        """Ports (and other ranges and sets) this slave does not have, or that a live task
        holds: the master never sends such a launch, and the slave runs none."""
        if not task.discrete:
            return None
        if not self.discrete.contains(task.discrete):
            return f"task {task.task_id}: {task.discrete} are not all among this slave's"
        held = Discrete.union(r.info.discrete for r in self.tasks.values() if not r.state.terminal)
        if held.overlap(task.discrete):
            return f"task {task.task_id}: {task.discrete} overlap a running task's"
        return None

    def owner_problem(self, msg: RunTask) -> str | None:
        """A framework runs here for one principal: a launch for its id in another's name
        (which a master should never send) reaches none of its tasks or executors."""
        owner = self.owners.of(msg.framework_id)
        if owner is None or owner == msg.principal:
            return None
        fid = msg.framework_id
        live = any(k[0] == fid and not r.state.terminal for k, r in self.tasks.items())
        if live or any(e.framework_id == fid for e in self.executors.values()):
            return f"framework {fid} runs here for another principal"
        return None
