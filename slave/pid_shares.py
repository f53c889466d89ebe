"""How many processes and threads a task may have: its share of the host's.

A thread costs a pid and little memory (some 40 KB charged to its cgroup), so a memory
limit does not bound them: one tenant's task of 1.3 GB holds every pid of a host whose
`pid_max` is 32,768, and no other tenant's task, nor the slave, can fork. So each task
is bounded (its cgroup's `pids.max`) by its dominant share of the slave (the larger of
its cpus and its mem over the slave's) of a budget: three eighths of what the host has.
The shares of the tasks a slave runs at once add up to 2 at the most (1 of cpus, 1 of
mem), so together they hold three quarters of the host's pids at the most, whoever's
(the slave's parent cgroup holds them to it); the rest stays for the host and the slave.

A task is given LEAST however small it is (a shell and its command need a few), and that
floor breaks the sum: 72 tasks of 0.01 cpus each hold 16, together 30 times what their
shares are worth. So a principal's tasks are held together too (its group's `pids.max`,
slave.principal_groups) to their shares summed of the budget: its tiny tasks share its
own pids, never another principal's. A principal whose tasks hold a share s of the slave
can then always have s x the budget, whatever the others run, less LEAST for each other
principal whose tasks are worth fewer (each group's own floor).

An operator's `--max-task-pids N` is a fixed bound a task instead (their sum, and no
group's bound: the operator's own), and 0 none (as Mesos, without its pids isolator).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from protocol.wire.resources import Resources

BUDGET = 3 / 8  # of the host's pids, each task's share of it its dominant share
LEAST = 16  # a task's bound however small it is (its shells and its command take 3)
KERNEL = Path("/proc/sys/kernel")


def host_pids(kernel: Path = KERNEL) -> int:
    """The most pids and threads this host has (`pid_max`, `threads-max`)."""
    return min(int((kernel / name).read_text()) for name in ("pid_max", "threads-max"))


@dataclass(frozen=True)
class PidShares:
    """Each task's `pids.max`: `fixed` if the operator set one (0: none), else its share."""

    host: int  # the host's pids (host_pids)
    slave: Resources  # what the slave offers
    fixed: int | None = None

    @cached_property
    def _whole(self) -> dict[str, float]:
        """The slave's cpus and mem (read at each launch, twice: its own bound, and its
        principal's group's)."""
        whole = self.slave.quantities()
        return {name: whole[name] for name in ("cpus", "mem") if whole.get(name)}

    @property
    def bounded(self) -> bool:
        return self.fixed != 0

    def together(self) -> int | None:
        """The bound of all the slave's tasks together (its parent cgroup's): what their
        shares add up to at the most, so that tasks below LEAST's floor, many of them,
        still leave the host and the slave their quarter."""
        if self.fixed is not None:
            return None  # (the operator's own bound a task: theirs to add up)
        return int(self.host * BUDGET * 2)

    def share(self, resources: Resources) -> float:
        """Its dominant share of the slave: the larger of its cpus and its mem over the
        slave's (1 at the most)."""
        mine = resources.quantities()
        share = max((mine.get(name, 0.0) / of for name, of in self._whole.items()), default=1.0)
        return min(share, 1.0)

    def of(self, resources: Resources) -> int | None:
        """The bound of a task (or an executor and its tasks) given `resources`."""
        if self.fixed is not None:
            return self.fixed or None
        return max(LEAST, int(self.host * BUDGET * self.share(resources)))

    def of_principal(self, shares: float) -> int | None:
        """The bound of one principal's tasks together (its group's), `shares` their
        dominant shares summed (2 at the most: all the slave's cpus and mem): never below
        any one of its tasks' own (LEAST its floor too). None with the operator's fixed
        bound, or none."""
        if self.fixed is not None:
            return None
        return max(LEAST, int(self.host * BUDGET * min(shares, 2.0)))
