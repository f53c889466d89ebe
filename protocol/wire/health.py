"""A task's health check, as Mesos defines it (`HealthCheck` in `TaskInfo`): a command, an
HTTP GET or a TCP connect, run every interval by the slave for a command task and by the
SDK's executor driver for an executor's task (protocol.health_checker); the task is
reported healthy or not as that changes, and killed after `consecutive_failures`.

Bounded, as everything a tenant sends: no check more often than once a second, none
waiting more than a minute, so that one task cannot have its slave run checks without
pause."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

MIN_CHECK_INTERVAL = 1.0  # seconds between two checks of one task, at least
MAX_CHECK_TIMEOUT = 60.0  # seconds one check may take, at most
MAX_CHECK_DELAY = 3600.0  # seconds before the first check, or of grace, at most


class _Model(BaseModel):
    # (the wire's base, `values.Wire`, imports this module: its config, repeated)
    model_config = ConfigDict(extra="forbid")


class HealthCheckType(StrEnum):
    COMMAND = "COMMAND"
    HTTP = "HTTP"
    TCP = "TCP"


class CommandCheck(_Model):
    """A shell command, run as the task runs (a command task's: its user, its PID
    namespace, its cgroup; an executor's task's: as its executor runs), in its sandbox:
    exit status 0 is healthy."""

    value: str = Field(min_length=1, max_length=65536)
    """Run as `sh -c VALUE`."""
    environment: dict[str, str] = Field(default_factory=dict, max_length=100)
    """Variables beside the task's own."""


class HTTPCheck(_Model):
    """An HTTP GET of `http://127.0.0.1:PORT/PATH` from the slave (or the task's
    executor): a status of 200-399 is healthy (Mesos's rule). The task shares the
    slave's network."""

    port: int = Field(ge=1, le=65535)
    path: str = Field(default="/", max_length=1024, pattern=r"^/[\x21-\x7e]*$")
    """Absolute, printable ASCII, no spaces."""


class TCPCheck(_Model):
    """A TCP connect to `127.0.0.1:PORT` from the slave (or the task's executor): one
    accepted is healthy."""

    port: int = Field(ge=1, le=65535)


class HealthCheck(_Model):
    """A task's health check (Mesos's HealthCheck): `type` and its own field, and when
    it runs. Its results reach the framework as TASK_RUNNING updates with `healthy` (and
    REASON_TASK_HEALTH_CHECK_STATUS_UPDATED) when the task's health changes; after
    `consecutive_failures` failures in a row the task is killed (with its kill policy's
    grace) and ends TASK_KILLED, `healthy` false."""

    type: HealthCheckType
    command: CommandCheck | None = None
    http: HTTPCheck | None = None
    tcp: TCPCheck | None = None
    delay_seconds: float = Field(default=15.0, ge=0, le=MAX_CHECK_DELAY)
    """Before the first check, from the task's start (Mesos's default: 15)."""
    interval_seconds: float = Field(default=10.0, ge=MIN_CHECK_INTERVAL, le=MAX_CHECK_DELAY)
    """Between the end of one check and the start of the next (at least 1 s)."""
    timeout_seconds: float = Field(default=20.0, gt=0, le=MAX_CHECK_TIMEOUT)
    """How long one check may take; past it, it failed (at most 60 s)."""
    grace_period_seconds: float = Field(default=10.0, ge=0, le=MAX_CHECK_DELAY)
    """From the task's start: failures in it do not count, until a first success."""
    consecutive_failures: int = Field(default=3, ge=1, le=1000)
    """Failures in a row that kill the task."""

    @model_validator(mode="after")
    def _its_own_field(self) -> HealthCheck:
        given = {
            HealthCheckType.COMMAND: self.command,
            HealthCheckType.HTTP: self.http,
            HealthCheckType.TCP: self.tcp,
        }
        if given[self.type] is None:
            raise ValueError(f"a {self.type.value} health check needs its {self.type.lower()}")
        if sum(v is not None for v in given.values()) > 1:
            raise ValueError("a health check has one of command, http or tcp")
        return self
