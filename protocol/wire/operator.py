"""Operator -> master: the calls only an operator principal may make."""

from __future__ import annotations

from pydantic import Field, field_validator

from protocol.wire.resources import Limit, Resources
from protocol.wire.values import MAX_WEIGHT, Id, Wire


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


class SetQuota(Wire):
    """Operator -> master: a role's quota (Mesos 1.9): what it is guaranteed and what it
    may hold at most. An empty guarantee and no limit clear it."""

    role: str = Field(min_length=1, max_length=200)
    guarantee: Resources = Field(default_factory=Resources)
    limit: Limit | None = None  # zeros kept: `cpus: 0` allows no cpus at all


class MarkSlaveGone(Wire):
    """Operator -> master: this slave is gone for good (Mesos's MARK_AGENT_GONE). Its
    tasks end TASK_GONE_BY_OPERATOR (TASK_LOST for frameworks not partition-aware), and
    it may not come back under this id."""

    slave_id: Id


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
