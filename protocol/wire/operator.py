"""Operator -> master: the calls only an operator principal may make."""

from __future__ import annotations

from pydantic import Field, field_validator

from protocol.wire.framework import OfferOperation
from protocol.wire.resources import Limit, Resources
from protocol.wire.values import MAX_KILL_GRACE, MAX_WEIGHT, Id, Wire


class SetWeights(Wire):
    """Operator -> master: roles' weights (Mesos's /weights), any node of the role tree."""

    weights: dict[str, float] = Field(default_factory=dict, max_length=1000)

    @field_validator("weights")
    @classmethod
    def _positive(cls, weights: dict[str, float]) -> dict[str, float]:
        for role, weight in weights.items():
            if not 0 < weight <= MAX_WEIGHT or not 0 < len(role) <= 200:
                raise ValueError(f"{role!r}: a role (1-200 chars) and a weight in (0, 1e6]")
        return weights


MAX_QUOTA_RESOURCES = 100  # resources a quota's guarantee (or its limit) names


class SetQuota(Wire):
    """Operator -> master: a role's quota (Mesos 1.9): what it is guaranteed and what it
    may hold at most. An empty guarantee and no limit clear it."""

    role: str = Field(min_length=1, max_length=200)
    guarantee: Resources = Field(default_factory=Resources)
    limit: Limit | None = None  # zeros kept: `cpus: 0` allows no cpus at all

    @field_validator("guarantee", "limit")
    @classmethod
    def _few(cls, resources: Resources | None) -> Resources | None:
        # (kept in the registry, a node of its own: names of up to 1,024 characters each)
        if resources is not None and len(resources) > MAX_QUOTA_RESOURCES:
            raise ValueError(f"a quota names at most {MAX_QUOTA_RESOURCES} resources")
        return resources


class SetQuotas(Wire):
    """Operator -> master: several roles' quotas at once, all or none (Mesos's
    UPDATE_QUOTA: if one cannot be set, none is). Each as a `SetQuota` says it."""

    quotas: list[SetQuota] = Field(min_length=1, max_length=100)

    @field_validator("quotas")
    @classmethod
    def _each_role_once(cls, quotas: list[SetQuota]) -> list[SetQuota]:
        roles = [q.role for q in quotas]
        if len(set(roles)) != len(roles):
            raise ValueError("a role is named more than once")
        return quotas


class MarkSlaveGone(Wire):
    """Operator -> master: this slave is gone for good (Mesos's MARK_AGENT_GONE). Its
    tasks end TASK_GONE_BY_OPERATOR (TASK_LOST for frameworks not partition-aware), and
    it may not come back under this id."""

    slave_id: Id


class DrainSlave(Wire):
    """Operator -> master: drain this slave for maintenance (Mesos 1.9's DRAIN_AGENT).
    It is offered to no one from now on (its outstanding offers rescinded) and each of
    its tasks is killed, with its own grace but at most `max_grace_period`; it is DRAINED
    once the last of them has ended and its framework acknowledged that, and then marked
    gone if `mark_gone`. Cannot be undone until DRAINED (then REACTIVATE_AGENT)."""

    slave_id: Id
    max_grace_period: float | None = Field(default=None, ge=0, le=MAX_KILL_GRACE)
    """Seconds between SIGTERM and SIGKILL at most, over the tasks' own kill policies
    (None: each task's own grace, or its slave's default)."""
    mark_gone: bool = False
    """Mark the slave gone once drained: its tasks end TASK_GONE_BY_OPERATOR (for
    partition-aware frameworks; TASK_KILLED for the others) and it may not come back."""


class DeactivateSlave(Wire):
    """Operator -> master: offer this slave to no one (Mesos's DEACTIVATE_AGENT); its
    tasks run on, and its outstanding offers are rescinded."""

    slave_id: Id


class ReactivateSlave(Wire):
    """Operator -> master: offer a deactivated (or DRAINED) slave again (Mesos's
    REACTIVATE_AGENT). Refused while it is still DRAINING."""

    slave_id: Id


class OperateResources(Wire):
    """Operator -> master: RESERVE, UNRESERVE, CREATE, DESTROY, GROW_VOLUME or
    SHRINK_VOLUME on a slave's free resources (Mesos's RESERVE_RESOURCES,
    UNRESERVE_RESOURCES, CREATE_VOLUMES, DESTROY_VOLUMES, GROW_VOLUME, SHRINK_VOLUME), as
    the operator principal's grants allow. A reservation's principal left out is the
    operator's."""

    slave_id: Id
    operation: OfferOperation


MAX_WATCH_SECONDS = 600.0


class WatchEvents(Wire):
    """Operator -> master: publish the cluster's event stream (`<cluster>/events`) for the
    next `seconds`. A lease, renewed while one watches (and sent again to a new leader):
    as Mesos streams events to its subscribers only, the stream goes to nobody unwatched,
    and a busy master does not encode and publish a third of its bytes for no reader."""

    seconds: float = Field(default=60.0, gt=0, le=MAX_WATCH_SECONDS)


class Watching(Wire):
    """Master -> operator: a lease on the event stream held (the answer to WatchEvents),
    for `seconds`. A follower that hears none was not heard: the broker drops the lease of
    a principal that is not an operator, and MQTT 3.1.1 tells the sender nothing."""

    seconds: float = Field(gt=0, le=MAX_WATCH_SECONDS)
