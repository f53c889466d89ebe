"""Pacing a slave's (re-)registration, as a Mesos agent paces its own.

A master that starts, or a new leader after a failover, is reached by every slave at
once. As Mesos's `--registration_backoff_factor`: a slave waits a random time in
[0, factor] before its first attempt, and each retry a random time under a bound that
doubles (from at least a second, so a factor of 0 does not spin) up to `RETRY_CAP` (or
the first bound, when that is longer: a bound never shrinks). Spread that way, N slaves
arrive at about N / factor a second, not all in one instant, and retries that a busy
master has not answered yet do not pile on it in step.

A retry is worth sending only if the first attempt was lost; one that a master behind
in its reading has not got to yet is a second copy for it to read. With a cap of 30 s
under a first bound of 2 x 25 s, the bound fell from 50 s to 30 s after the first retry:
in a 50,000-slave failover with 100,000 tasks whose new leader fell a minute behind,
69,999 re-registrations were read for 50,000 slaves.
"""

from __future__ import annotations

import random

RETRY_CAP = 60.0  # seconds: the longest wait between two attempts, as Mesos's (1 min)
RETRY_FLOOR = 1.0  # seconds: the first retry's bound, whatever the factor
_RNG = random.Random()  # (seeded once: seeding one an attempt from os.urandom cost more
# than the rest of a fleet slave's attempt)


class RegistrationBackoff:
    def __init__(self, factor: float, rng: random.Random | None = None) -> None:
        self.factor = max(0.0, factor)
        self._rng = rng or _RNG
        self._bound = max(RETRY_FLOOR, 2 * self.factor)
        self._cap = max(RETRY_CAP, self._bound)

    def first(self) -> float:
        """Before the first attempt: uniform in [0, factor]."""
        return self._rng.uniform(0.0, self.factor) if self.factor else 0.0

    def retry(self) -> float:
        """Before the next retry: uniform in [bound/2, bound], the bound doubling each time
        up to RETRY_CAP or the first bound, whichever is longer (never less than half the
        bound: a retry sooner than the master could answer only adds to its backlog)."""
        bound = self._bound
        self._bound = min(self._cap, bound * 2)
        return self._rng.uniform(bound / 2, bound)
