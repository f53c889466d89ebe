"""What the master's HTTP API answers, as pydantic models (the OpenAPI schemas come from
them, and the tests validate every answer against those schemas)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from protocol.wire.messages import ClusterEvent, FrameworkView, Offer, RoleView, SlaveView, TaskView


class Page(BaseModel):
    model_config = ConfigDict(extra="forbid")
    total: int  # how many match, in all
    offset: int
    limit: int


class Frameworks(BaseModel):
    model_config = ConfigDict(extra="forbid")
    frameworks: list[FrameworkView]
    # the last frameworks removed, oldest first (Mesos's completed_frameworks, bounded)
    completed_frameworks: list[FrameworkView] = []


class Slaves(Page):
    slaves: list[SlaveView]


class Tasks(Page):
    tasks: list[TaskView]


class Offers(Page):
    """Offers made and not yet answered (accepted, declined or rescinded)."""

    offers: list[Offer]


class Roles(BaseModel):
    model_config = ConfigDict(extra="forbid")
    policy: str
    roles: list[RoleView]


class Limit(BaseModel):
    """`qps` calls a second (null: no limit); `capacity` calls may wait (null: any)."""

    model_config = ConfigDict(extra="forbid")
    qps: float | None
    capacity: int | None


class PrincipalLimit(Limit):
    """A principal's limit and what it did: handled (charged to the limit), throttled (of
    those, the ones that waited), refused (the queue full), queued (waiting now)."""

    principal: str
    queue: str  # the principal's own, or "*": the one the aggregate default shares
    handled: int
    throttled: int
    refused: int
    queued: int


class Limits(BaseModel):
    """The master's rate limits (Mesos's --rate_limits) and the calls they held."""

    model_config = ConfigDict(extra="forbid")
    default: Limit  # each principal not listed, its own (without an aggregate default)
    aggregate_default: Limit | None  # the principals not listed, all together
    principals: list[PrincipalLimit]


class Events(BaseModel):
    model_config = ConfigDict(extra="forbid")
    events: list[ClusterEvent]


class TaskFile(BaseModel):
    """A part of a task's stdout or stderr (`data` decoded as UTF-8, bad bytes replaced)."""

    model_config = ConfigDict(extra="forbid")
    framework_id: str
    task_id: str
    name: str
    offset: int
    size: int
    data: str


class SlaveChurnView(BaseModel):
    """The slaves' comings and goings since this master took over (see /metrics)."""

    model_config = ConfigDict(extra="forbid")
    connected: int = 0
    disconnected: int = 0
    registrations: int = 0
    reregistrations: int = 0
    disconnects: int = 0
    removals: dict[str, int] = {}  # by cause: unreachable, operator, recovery


class Health(BaseModel):
    """Always 200 while the master answers: `status` is `ok`, `behind` (its oldest
    unhandled message has waited past --health-max-backlog-age) or `standby`."""

    model_config = ConfigDict(extra="forbid")
    status: Literal["ok", "behind", "standby"]
    master_id: str
    slaves: int = 0
    frameworks: int = 0
    elected: bool = True  # False on a standby
    leader: str = Field(
        "",
        description="The leading master's HTTP address, HOST:PORT as --http takes it, on "
        "the leader and on a standby alike; empty while none is known.",
        # documented, not enforced: a liveness answer must not fail over its form
        json_schema_extra={"pattern": r"^([^/]+:[0-9]+)?$"},
    )
    backlog: int = 0  # messages received, not yet handled
    oldest_wait_seconds: float = 0.0  # how long the oldest of them has waited
    last_wait_seconds: float = 0.0  # how long the message handled last had waited
    max_backlog_age: float | None = None  # past this, `behind`
    slave_churn: SlaveChurnView | None = None  # None on a standby


class Problem(BaseModel):
    """An error answer."""

    model_config = ConfigDict(extra="forbid")
    error: str
