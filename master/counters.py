"""What the master counts so that an operator sees it fall behind: the messages it
received and what became of each (per type), and the slaves' comings and goings.

Mesos answers the same questions from /metrics/snapshot (master/messages_*,
master/slave_registrations, master/slave_removals, master/recovery_slave_removals);
`master.http.metrics` serves these counts, `/health` reads them too.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from protocol.transport.message_counts import MessageCounts

__all__ = ["MessageCounts", "SlaveChurn"]


@dataclass
class SlaveChurn:
    """Slaves registered, re-registered, disconnected and removed (by cause:
    `unreachable` past the heartbeat timeout, `operator` marked gone, `recovery` not back
    within the re-register timeout after a failover), and the failover's progress."""

    registrations: int = 0
    reregistrations: int = 0
    retries_absorbed: int = 0  # Registers answered by the one whose record was being written
    disconnects: int = 0
    removals: Counter[str] = field(default_factory=Counter)
    recovery_expected: int = 0  # slaves of the registry when this master took over
    recovery_back: int = 0  # of those, back
    recovery_removed: int = 0  # of those, removed for not coming back in time
    # how this master's term began: seconds reading the registry, and from winning the
    # election until serving (the rest of a failover's election is the old leader's
    # session expiring in ZooKeeper)
    takeover_bus_seconds: float = 0.0  # (connecting to the broker, after winning)
    takeover_registry_seconds: float = 0.0
    takeover_seconds: float = 0.0
    won_at: float = 0.0  # the wall clock when it won the election
    recovered_at: float = 0.0  # the wall clock when the last one expected was back or removed

    def recovered_one(self, waiting: int) -> None:
        """One of the registry's slaves is back (or removed); `waiting` still awaited."""
        if not waiting:
            self.recovered_at = time.time()
