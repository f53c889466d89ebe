"""CPU seconds each party of a benchmark run spent in each phase, from /proc.

On a shared 2-core machine a phase's wall time says as much about the other processes
as about ours; the CPU it took does not: a phase that took C seconds of CPU in all needs
at least C / cores seconds on a quiet machine, and the parties' shares say whose time it
was (the master's, the slaves', the broker's, ZooKeeper's, the benchmark's own
frameworks'). A process that has ended keeps what it spent (the killed leader's).
"""

from __future__ import annotations

import os
from collections.abc import Callable

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """The process's user and system CPU so far (None: it has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICK


class PartyCpu:
    """`parties()` names each party's pids at the moment asked (processes come and go)."""

    def __init__(self, parties: Callable[[], dict[str, list[int]]]) -> None:
        self.parties = parties
        self._seen: dict[int, tuple[str, float]] = {}  # pid: (party, its CPU when last read)
        self._mark = self._read()

    def _read(self) -> dict[str, float]:
        for party, pids in self.parties().items():
            for pid in pids:
                spent = cpu_seconds(pid)
                if spent is not None:
                    self._seen[pid] = (party, spent)
        times = os.times()
        totals = {"benchmark": times.user + times.system}  # (our frameworks, our polls)
        for party, spent in self._seen.values():
            totals[party] = totals.get(party, 0.0) + spent
        return totals

    def phase(self) -> dict[str, float]:
        """Each party's CPU seconds since the last phase ended (or since we began), and
        `all`, their sum."""
        now = self._read()
        spent = {p: round(now[p] - self._mark.get(p, 0.0), 1) for p in sorted(now)}
        spent["all"] = round(sum(spent.values()), 1)
        self._mark = now
        return spent
