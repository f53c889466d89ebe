"""How much an executor may say to its framework through the slave, and how fast it may
report its tasks' states.

An executor's FrameworkMessages go to the master on the slave's own connection, in the
slave principal's queue there, ahead of the status updates of every other tenant's
tasks on this slave (a slave principal is not rate limited: it speaks for many). An
executor is a tenant's code, so each principal's executors on a slave share a budget
of messages and bytes, with a burst, kept when they exit (more executors, or one
started again, say no more); what is over it is dropped, as Mesos's framework messages
may be (they are best effort, never retried), and the executor is told.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MESSAGES_A_SECOND = 100.0
MESSAGES_AT_ONCE = 1_000.0
BYTES_A_SECOND = 4.0 * 1024 * 1024
BYTES_AT_ONCE = 16.0 * 1024 * 1024  # (four of the executor line's largest frames)


@dataclass(slots=True)
class Bucket:
    """Tokens that come back at `rate` a second, up to `burst`."""

    rate: float
    burst: float
    tokens: float = field(init=False)
    at: float | None = None

    def __post_init__(self) -> None:
        self.tokens = self.burst

    def refill(self, now: float) -> None:
        if self.at is not None:
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now


@dataclass(slots=True)
class MessageBudget:
    """One executor's: a message passes while both its count and its bytes have room."""

    messages: Bucket = field(default_factory=lambda: Bucket(MESSAGES_A_SECOND, MESSAGES_AT_ONCE))
    size: Bucket = field(default_factory=lambda: Bucket(BYTES_A_SECOND, BYTES_AT_ONCE))
    dropped: int = 0  # over the budget since it was last told

    def take(self, nbytes: int, now: float) -> bool:
        """Whether a message of `nbytes` passes now (it is then counted)."""
        self.messages.refill(now)
        self.size.refill(now)
        if self.messages.tokens < 1 or self.size.tokens < nbytes:
            self.dropped += 1
            return False
        self.messages.tokens -= 1
        self.size.tokens -= nbytes
        return True


# An executor's status updates are not best effort: each is journaled, kept until
# acknowledged, and its task's state is the framework's to hear. So they are paced, not
# dropped: past its principal's rate on this slave (a burst first), the slave reads
# nothing more from that executor until the pace allows, and the executor's writes wait
# in its own process. One tenant's executor reporting RUNNING as fast as it could took
# the slave's whole core (96%), and another tenant's `true` task then took 862 ms from
# launch to its end where it took 5.9 (the longest 20 s, against 16 ms). Every other
# message an executor sends (a token check, a framework message, a malformed frame) is
# counted at the same pace: one answered at once costs the slave's loop as much.
UPDATES_A_SECOND = 1_000.0
UPDATES_AT_ONCE = 2_000.0  # (a thousand tasks' STARTING and RUNNING at once)


@dataclass(slots=True)
class UpdatePace:
    """One principal's executors' messages on a slave: `delay` says how long the next
    one waits. Each is counted as it comes, into debt if need be, so that executors
    waiting side by side queue behind one another: together they get the bucket's rate."""

    bucket: Bucket = field(default_factory=lambda: Bucket(UPDATES_A_SECOND, UPDATES_AT_ONCE))
    paced: int = 0  # messages that waited since its burst was last whole (0: none)

    def delay(self, now: float) -> float:
        """Count a message at `now`: seconds it waits first (0: none)."""
        bucket = self.bucket
        bucket.refill(now)
        if bucket.tokens == bucket.burst:
            self.paced = 0
        bucket.tokens -= 1
        if bucket.tokens >= 0:
            return 0.0
        self.paced += 1
        return -bucket.tokens / bucket.rate
