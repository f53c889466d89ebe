"""A cgroup per principal between the slave's parent and its containers
(`drfmesos/<slave>/~p.<principal>/<container>`), holding that principal's tasks together.

Each task's `pids.max` is its share of the slave's pid budget, floored at LEAST
(slave.pid_shares): many tiny tasks of one tenant, each at the floor, together held what
the slave's parent allows all of them, and another tenant's task could not fork. The
kernel bounds a cgroup's processes with its ancestors' too, so the principal's level holds
its tasks to their shares summed (`PidShares.of_principal`), as systemd's slices hold a
user's sessions: a tenant's tiny tasks share its own pids, and never take another's.

The level weighs, against the other principals' under contention, the cpus its tasks
were given (left at the default, one cpu's, a principal's tasks together would weigh one
cpu however many DRF gave them); it has no memory limit or CPU cap of its own (its tasks
have theirs). Both are written as its tasks start, are resized and end: a few cgroupfs
writes, only what changed. It is the tenant's no more than the slave's parent is: its
files stay root's (a task may not raise its own bound), and others pass it, never list it
(`Cgroups.seal`).

A group is made at its principal's first launch here. Once its last container has gone it
holds nothing the kernel bounds, and it is removed a while later (cgroup_upkeep) with the
spares kept in it, unless a launch of its principal comes first: a task loop's next task
finds it as the last one left it, and writes nothing to it.
"""

from __future__ import annotations

import os

from protocol.wire.resources import Resources
from slave.cgroups import Cgroups, Limits
from slave.pid_shares import PidShares

GROUP = "~p"  # a group's name: `~p.<principal>` (no container's name holds a ~)


def is_group(path: str) -> bool:
    return os.path.basename(path).startswith(f"{GROUP}.")


class PrincipalGroups:
    """The containers in each principal's group and what each was given, and the limits
    each group's cgroup holds (written in the loop: a few small cgroupfs writes)."""

    def __init__(self, cgroups: Cgroups, pids: PidShares | None) -> None:
        self.cgroups = cgroups
        self.pids = pids  # None: no bound of processes at all
        # group -> container -> what it was given: its cpus and its share of the slave
        self._members: dict[str, dict[str, tuple[float, float]]] = {}
        self._held: dict[str, Limits] = {}  # what each group's cgroup holds, once written

    def __contains__(self, container: str) -> bool:
        return container in self._members.get(os.path.dirname(container), {})

    def empty(self, group: str) -> bool:
        """No container of its principal's is in it (it may be there, or have gone)."""
        return group not in self._members

    def forget(self, group: str) -> None:
        """It may be gone (removed while empty): the next write makes it again."""
        self._held.pop(group, None)

    def groups(self) -> list[str]:
        return list(self._members)

    def limits(self, group: str) -> Limits:
        """What the group's tasks were given, together."""
        given = self._members.get(group, {}).values()
        cpus = sum(cpus for cpus, _ in given)
        if self.pids is None:
            return Limits(cpus=cpus)
        return Limits(cpus=cpus, max_pids=self.pids.of_principal(sum(s for _, s in given)))

    def join(self, container: str, resources: Resources) -> tuple[float, float] | None:
        """Book `container` (a path in its group) with what it was given, or resized;
        what it had before, if it was booked."""
        members = self._members.setdefault(os.path.dirname(container), {})
        before = members.get(container)
        cpus = resources.quantities().get("cpus", 0.0)
        members[container] = (cpus, self.pids.share(resources) if self.pids else 0.0)
        return before

    def leave(self, container: str, before: tuple[float, float] | None = None) -> str | None:
        """Its container gone (or its launch failed: `before`, what it had booked before,
        is booked again): the group's bound written anew; the group, if it is left empty
        (it holds what it held, for the next: nothing in it to bound)."""
        group = os.path.dirname(container)
        members = self._members.get(group)
        if members is None or container not in members:
            return None
        if before is not None:
            members[container] = before
        else:
            del members[container]
        if members:
            self.write(group)
            return None
        del self._members[group]
        return group

    def write(self, group: str) -> None:
        """The group's limits, as its books say: made (and sealed) if it is not held."""
        limits, held = self.limits(group), self._held.get(group)
        if held is None:
            self.cgroups.create(group, limits)
            self.cgroups.seal(group)
        elif held != limits:
            self.cgroups.limit(group, limits, held)
        self._held[group] = limits
