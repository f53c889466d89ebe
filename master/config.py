"""What an operator sets of a master, read once (the `drfmesos master` flags' defaults are
these fields' defaults: `master.cli` reads them here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from master.allocation.preemption import PreemptionConfig
from master.cycle import ROUND_BATCH, CycleConfig
from master.http.config import HttpConfig
from master.rate_limits import RateLimits
from protocol.wire.resources import Resources


@dataclass
class MasterConfig:
    policy: str = "hdrf"
    allocation_interval: float = 1.0
    round_batch: float = ROUND_BATCH  # frees within this window share one round
    # a round soon after a task's end frees its resources (off: they wait for the next
    # allocation interval, as in Mesos, whose allocator does not allocate on recovery,
    # MESOS-3078: what ends between two rounds is offered together)
    allocate_on_free: bool = True
    offer_timeout: float | None = None  # off by default, as in Mesos
    slave_timeout: float = 15.0
    heartbeat_interval: float = 5.0  # to frameworks, and asked of slaves
    state_interval: float = 0.5
    status_retry: float = 1.0  # first re-send of an unacknowledged update
    # a drained slave's updates owed to frameworks hold its drain this long at most, once
    # nothing runs there (a tenant that never acknowledges held it DRAINING forever)
    drain_ack_wait: float = 60.0
    role_weights: dict[str, float] = field(default_factory=dict)
    principals: Path | None = None  # the credentials store's principals.json (role ACLs)
    rate_limits: RateLimits | None = None  # per principal (master.rate_limits); None: none
    roles: Path | None = None  # the roles file: weights, orderings, quotas (kept up to date)
    # preemption (off unless a timeout is set): see master.preemptor
    preemption_timeout: float | None = None  # starving this long below the threshold
    preemption_threshold: float = 0.5  # x the fair share (YARN's fairSharePreemptionThreshold)
    preemption_notice: float = 2.0  # from the warning to the kill
    preemption_victims: str = "youngest"  # or "oldest" (to compare the work thrown away)
    guarantee_timeout: float | None = None  # a role below its quota guarantee this long
    quota_headroom: str = "all"  # whose unmet guarantees are kept free (the allocator's)
    # the least an offer holds, one of these (Mesos's --min_allocatable_resources); None
    # is Mesos's default (cpus 0.01 or mem 32), [] anything; a framework's own replace it
    min_allocatable: list[Resources] | None = None
    http: HttpConfig | None = None  # the API, metrics and web UI (master.http.api)
    # after a failover, slaves of the registry have this long to re-register; then their
    # tasks are reported lost
    slave_reregister_timeout: float = 30.0
    max_failover_timeout: float | None = None  # what frameworks ask for is cut to this
    max_frameworks_per_principal: int = 200  # registered at once (0: no most)

    def cycle(self) -> CycleConfig:
        """What the offer cycle (master.cycle) is told of this configuration."""
        return CycleConfig(
            policy=self.policy,
            allocation_interval=self.allocation_interval,
            offer_timeout=self.offer_timeout,
            preemption=PreemptionConfig(
                timeout=self.preemption_timeout,
                threshold=self.preemption_threshold,
                notice=self.preemption_notice,
                victims=self.preemption_victims,
                guarantee_timeout=self.guarantee_timeout,
            ),
        )


@dataclass(frozen=True)
class MasterInfo:
    """What a framework or slave is told as it (re-)registers: which master answers, in
    which term (its epoch, see master.ha.leadership), and how often to beat."""

    master_id: str
    epoch: int
    heartbeat_interval: float


DEFAULTS = MasterConfig()
"""A master as the flags leave it: what `drfmesos master --help` shows as defaults."""
