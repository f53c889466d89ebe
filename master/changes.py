"""Who hears of the master's state changes, as they happen.

The master says what changed as a `ClusterEvent` (`Outbox.emit`, master.outbox: a launch, a release,
a framework or slave added or removed, ...); every listener here hears it at once, in
the handler that made the change. The web UI's live feed is one listener, the Mesos
operator event stream (master.mesos_api.events) another. A task's state changes that no
event names (a non-terminal status update, a task that a re-registering slave brings
back) are told only to the listeners that asked for them (`tasks=True`), and only built
while one listens, so a master nobody watches pays nothing for them.
"""

from __future__ import annotations

from collections.abc import Callable

from protocol.wire.messages import ClusterEvent

Listener = Callable[[ClusterEvent], None]

# the kinds that only `tasks=True` listeners hear (see Outbox.task_changed)
TASK_ADDED = "task-added"  # a task the master learned of without launching it
TASK_UPDATED = "task-updated"  # a live task's new state


class Changes:
    def __init__(self) -> None:
        self._all: list[Listener] = []
        self._tasks: list[Listener] = []
        # a listener's `wanted`: whether it takes events now (none: always)
        self._wanted: dict[Listener, Callable[[], bool]] = {}

    def listen(
        self, listener: Listener, *, tasks: bool = False, wanted: Callable[[], bool] | None = None
    ) -> None:
        """`wanted`: whether `listener` takes events now (the web UI's feed only while a
        page watches): while no listener does, an event need not be built for them."""
        self._all.append(listener)
        if tasks:
            self._tasks.append(listener)
        if wanted is not None:
            self._wanted[listener] = wanted

    def unlisten(self, listener: Listener) -> None:
        for listeners in (self._all, self._tasks):
            if listener in listeners:
                listeners.remove(listener)
        self._wanted.pop(listener, None)

    @property
    def wanted(self) -> bool:
        """Whether a listener takes events now."""
        for listener in self._all:
            wanted = self._wanted.get(listener)
            if wanted is None or wanted():
                return True
        return False

    @property
    def tasks_wanted(self) -> bool:
        return bool(self._tasks)

    def emit(self, event: ClusterEvent) -> None:
        task_only = event.kind in (TASK_ADDED, TASK_UPDATED)
        for listener in tuple(self._tasks if task_only else self._all):
            listener(event)
