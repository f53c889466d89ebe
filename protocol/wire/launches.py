"""What a launch takes from the offers it uses, counted one way for the master, which
launches or refuses each task, and for the SDK's pre-check, which refuses a launch the
master would refuse before it is sent (`frameworks.calls.launch_checked`).

As in Mesos, a task takes its own resources, and its custom executor's too if that
executor is not running on the slave yet: the executor holds them until it exits. A task
that names a running executor with other resources than it runs with is refused.

A task group (`TaskGroup`, Mesos's LAUNCH_GROUP) takes its executor's resources if that
executor is not running yet, then each task's, all of them or none: its room is tried on a
copy (`OfferRoom.group_problem`) before any of it is taken.

A shared volume offered may be used by every task of the launch: the first takes the
offer's copy, each other one a copy more (`copies`: Mesos's additional shared resources,
which the master allocates to the framework beside the offer's).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

from protocol.wire.discrete import EMPTY, Discrete
from protocol.wire.reservations import is_shared, parse_key, partial_volume
from protocol.wire.resources import Resources, add_millis
from protocol.wire.values import ExecutorInfo, TaskGroup, TaskInfo


class OfferRoom:
    """What is left of the offers of one launch on `slave_id`, task by task. `running`:
    the framework's executors on that slave, with their resources where known (None: the
    SDK knows only that it runs, from its offer's `executor_ids`). `values`: the offers'
    ports (and other range and set values), each for one task; `holding`: those the
    slave's live tasks hold (the master knows them; a task may take none of them)."""

    def __init__(
        self,
        slave_id: str,
        left: Resources,
        running: Mapping[str, Resources | None],
        values: Discrete = EMPTY,
        holding: Discrete = EMPTY,
    ) -> None:
        self.slave_id, self.left = slave_id, left
        self.running = dict(running)
        self.values, self.holding = values, holding
        self.shared = _shared(left)  # the shared volumes offered, whole
        self.copies: dict[str, int] = {}  # what tasks use of them past the offer's copy

    def operated(self, used: Resources, made: Resources) -> None:
        """An operation of the launch turned `used` of what is left into `made` (CREATE
        made a shared volume, say: the launch's tasks may use it)."""
        self.left = self.left - used + made
        self.shared = _shared(self.left)

    def _usable(self) -> Resources:
        """What is left, with every shared volume offered whole again (one more copy)."""
        if not self.shared:
            return self.left
        missing = {k: v - self.left.get_millis(k) for k, v in self.shared.items()}
        return self.left + Resources.from_millis(missing)

    def problem(self, task: TaskInfo) -> str | None:
        """Why `task` cannot take its room from what is left, or None."""
        tid = task.task_id
        if task.slave_id != self.slave_id:
            return f"task {tid}: slave_id {task.slave_id} is not the offer's slave {self.slave_id}"
        if not task.resources:
            return f"task {tid}: asks for no resources"
        need = task.resources
        if task.executor is not None:
            eid = task.executor.executor_id
            if eid not in self.running:
                need = need + task.executor.resources
            elif (held := self.running[eid]) is not None and held != task.executor.resources:
                return f"task {tid}: executor {eid} runs with {held}, not {task.executor.resources}"
        problem = values_problem(task, self.values, self.holding, self.slave_id)
        if problem is not None:  # (its ports, named, before their count)
            return problem
        left = self._usable()
        if (volume := partial_volume(need.millis, left.millis)) is not None:
            return (
                f"task {tid}: asks for {need[volume]:g} of volume {volume}, which is "
                f"{left[volume]:g}: a persistent volume is used whole"
            )
        if not left.contains(need):  # (which resource of which slave, and by how much)
            short = need.subtract_clamped(left)
            return (
                f"task {tid}: needs {need} but only {left} is left of the offer on slave "
                f"{self.slave_id}: short of {short}"
            )
        return None

    def take(self, task: TaskInfo) -> ExecutorInfo | None:
        """Take `task`'s room (its `problem` None); the executor it starts, if any."""
        self._take(task.resources)
        if task.discrete:
            self.values = self.values.subtract(task.discrete)
        executor = task.executor
        if executor is None or executor.executor_id in self.running:
            return None
        self._take(executor.resources)
        self.running[executor.executor_id] = executor.resources
        return executor

    def trial(self) -> OfferRoom:
        """A copy to try a group on: taking from it leaves this room as it is."""
        tried = copy.copy(self)
        tried.running, tried.copies = dict(self.running), dict(self.copies)
        return tried

    def executor_problem(self, executor_id: str, resources: Resources) -> str | None:
        """Why a task group's executor cannot run on what is left, or None: one running
        must be asked for with the resources it runs with, a new one must fit."""
        if executor_id in self.running:
            held = self.running[executor_id]
            if held is not None and held != resources:
                return f"executor {executor_id} runs with {held}, not {resources}"
            return None
        if any(n in resources.millis for n in self.values):
            return f"executor {executor_id}: an executor's resources may not hold ranges or sets"
        if (volume := next((k for k in resources.millis if parse_key(k).volume), None)) is not None:
            # (as a custom executor's, `task_problem`: no task of the group would see it;
            # and a part of one left the rest offered as if it were the volume)
            return (
                f"executor {executor_id}: {volume} is a persistent volume: a command task's "
                "alone, not a task group's executor's"
            )
        if not self._usable().contains(resources):
            short = resources.subtract_clamped(self._usable())
            return (
                f"executor {executor_id}: needs {resources} but only {self.left} is left of "
                f"the offer on slave {self.slave_id}: short of {short}"
            )
        return None

    def take_executor(self, executor_id: str, resources: Resources) -> bool:
        """Take a task group's executor's room (its `executor_problem` None): whether it
        starts with this group (else it runs already, and takes nothing)."""
        if executor_id in self.running:
            return False
        self._take(resources)
        self.running[executor_id] = resources
        return True

    def group_problem(self, group: TaskGroup) -> str | None:
        """Why `group` cannot take its room, all of it (its shape, `group_shape_problem`;
        its executor's, each task's in turn), or None. Nothing is taken."""
        problem = group_shape_problem(group)
        if problem is not None:
            return problem
        tried = self.trial()
        problem = tried.executor_problem(group.executor_id, group.executor_resources)
        if problem is not None:
            return problem
        tried.take_executor(group.executor_id, group.executor_resources)
        for task in group.tasks:
            if (problem := tried.problem(task)) is not None:
                return problem
            tried.take(task)
        return None

    def _take(self, resources: Resources) -> None:
        if self.shared:  # (a shared volume whose offered copy is taken: a copy more)
            for key, size in self.shared.items():
                if key in resources.millis and not self.left.get_millis(key):
                    self.copies[key] = self.copies.get(key, 0) + size
                    self.left = self.left + Resources.from_millis({key: size})
        self.left = self.left - resources


def group_shape_problem(group: TaskGroup) -> str | None:
    """Why `group` is not a task group the default executor runs, or None: each task a
    command task (the group's executor runs it: it names none of its own), each id once."""
    seen: set[str] = set()
    for task in group.tasks:
        tid = task.task_id
        if task.executor is not None:
            return (
                f"task {tid}: a task of a group runs under the group's executor "
                f"{group.executor_id}, not an executor of its own"
            )
        if tid in seen:
            return f"task {tid}: the task id is in the group twice"
        seen.add(tid)
    return None


def uses_shared(task: TaskInfo) -> str | None:
    """A shared volume `task` (or its executor) uses, or None."""
    executor = task.executor.resources.millis if task.executor else {}
    return next((k for k in (*task.resources.millis, *executor) if is_shared(k)), None)


def combined(offered: Sequence[Resources]) -> tuple[Resources, Resources]:
    """Offers of one slave accepted together: (what they hold together, each shared
    volume once; the copies past that, which go back). A framework may be offered a
    shared volume again while it keeps an offer of it, as Mesos offers it; merged, the
    offers hold one volume, not one twice its size (each copy is the whole volume)."""
    if len(offered) == 1:
        return offered[0], Resources()
    total: dict[str, int] = {}
    for resources in offered:
        add_millis(total, resources.millis)
    surplus: dict[str, int] = {}
    for key in [k for k in total if is_shared(k)]:
        one = max(r.millis.get(key, 0) for r in offered)  # (a copy: the whole volume)
        if total[key] > one:
            surplus[key] = total[key] - one
            total[key] = one
    return Resources.from_millis(total), Resources.from_millis(surplus)


def values_problem(task: TaskInfo, offer: Discrete, holding: Discrete, slave_id: str) -> str | None:
    """Why a task may not take the values it names (None: it may): each must be in what
    is left of its offer, and none held by another live task (`holding`). A task that
    counts a range or set of its offer without naming its values is refused too."""
    tid = task.task_id
    executor = task.executor.resources if task.executor is not None else {}
    if any(n in executor for n in offer):
        return f"task {tid}: an executor's resources may not hold ranges or sets (ports)"
    for name, value in task.discrete.items():
        have = offer.get(name)
        if have is None or not have.contains(value):
            left = have if have is not None else "none"
            return (
                f"task {tid}: {name} {value} are not in its offer on slave {slave_id} "
                f"(offered {left})"
            )
    clash = holding.overlap(task.discrete)
    if clash:
        name = clash[0]
        return (
            f"task {tid}: {name} {task.discrete[name]} overlap those another task holds on "
            f"slave {slave_id}"
        )
    unnamed = [n for n in offer if n in task.resources.millis and n not in task.discrete]
    if unnamed:
        name = unnamed[0]
        return (
            f"task {tid}: asks for {task.resources[name]:g} {name} without naming them: give "
            f"them in its discrete values, out of its offer's {offer[name]} "
            f"(frameworks.take_ports picks them)"
        )
    return None


def _shared(resources: Resources) -> dict[str, int]:
    return {k: v for k, v in resources.millis.items() if is_shared(k)}
