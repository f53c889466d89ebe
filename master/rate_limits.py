"""The operator's rate limits: Mesos's `--rate_limits` file, and who is held to what.

    {"limits": [{"principal": "team-a", "qps": 500, "capacity": 5000},
                {"principal": "trusted"}],
     "aggregate_default_qps": 1000, "aggregate_default_capacity": 10000}

As in Mesos: a listed principal without `qps` is not limited; the principals not listed
share the aggregate default (one queue for all of them) when it is set. Beyond Mesos,
`default_qps`/`default_capacity` give each principal not listed a limit of its own; the
master's `--rate-limit`/`--rate-capacity` fill them when the file does not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# The master's default, each framework or operator principal its own (docs: rate limits): well
# above what one SDK framework at full speed asks of this master (an Accept of tens of tasks
# is one call), far below what one flooding process can send or this master can answer.
DEFAULT_QPS = 1_000.0
DEFAULT_CAPACITY = 1_000
AGGREGATE = "*"  # the queue the principals under the aggregate default share


class RateLimitsError(ValueError):
    """A rate limits file that cannot be used, and why."""


class PrincipalLimit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    principal: str = Field(min_length=1)
    qps: float | None = Field(default=None, gt=0)  # None: not limited
    capacity: int | None = Field(default=None, ge=0)  # None: no bound on the queue


class RateLimitsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    limits: list[PrincipalLimit] = Field(default_factory=list)
    aggregate_default_qps: float | None = Field(default=None, gt=0)
    aggregate_default_capacity: int | None = Field(default=None, ge=0)
    default_qps: float | None = Field(default=None, gt=0)
    default_capacity: int | None = Field(default=None, ge=0)


@dataclass(frozen=True, slots=True)
class Limit:
    """`qps` calls a second (None: no limit), `capacity` calls waiting at most (None: any)."""

    qps: float | None
    capacity: int | None

    @property
    def burst(self) -> float:
        """What a quiet principal may send at once: one second's worth."""
        return max(1.0, self.qps or 1.0)


UNLIMITED = Limit(None, None)


class RateLimits:
    """Who is held to which limit, and which queue holds their calls."""

    def __init__(self, spec: RateLimitsFile) -> None:
        self.spec = spec
        self._listed = {p.principal: Limit(p.qps, p.capacity) for p in spec.limits}
        self.aggregate: Limit | None = None
        if spec.aggregate_default_qps is not None:
            self.aggregate = Limit(spec.aggregate_default_qps, spec.aggregate_default_capacity)
        self.default = Limit(spec.default_qps, spec.default_capacity)

    @classmethod
    def defaults(cls, qps: float | None, capacity: int | None) -> RateLimits:
        return cls(RateLimitsFile(default_qps=qps, default_capacity=capacity))

    def for_principal(self, principal: str) -> tuple[str, Limit]:
        """(the queue's key, its limit) for `principal`'s calls."""
        listed = self._listed.get(principal)
        if listed is not None:
            return principal, listed
        if self.aggregate is not None:
            return AGGREGATE, self.aggregate
        return principal, self.default

    def listed(self) -> dict[str, Limit]:
        return dict(self._listed)


def load_rate_limits(
    path: Path, default_qps: float | None, default_capacity: int | None
) -> RateLimits:
    """Read a rate limits file; the flags' defaults apply where it sets none."""
    try:
        spec = RateLimitsFile.model_validate(json.loads(path.read_text()))
    except OSError as e:
        raise RateLimitsError(f"{path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise RateLimitsError(f"{path}: not JSON: {e}") from None
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise RateLimitsError(f"{path}: {where}: {first['msg']}") from None
    if spec.default_qps is None and spec.default_capacity is None:
        defaults = {"default_qps": default_qps, "default_capacity": default_capacity}
        spec = spec.model_copy(update=defaults)
    return RateLimits(spec)
