"""A health check in a few characters, as `drfmesos run --health-check` takes it:
`http:PORT[/PATH]`, `tcp:PORT` or `cmd:COMMAND` (Mesos's HTTP, TCP and COMMAND checks),
its timing given beside it (delay, interval, timeout, grace, consecutive failures).

PORT is a number, or `$PORT0`, `$PORT1`, ...: the first, second, ... of the ports the
task is given out of its offer (as its environment names them; Marathon's `portIndex`).
Mesos's HealthCheck holds a number only, so such a check is resolved for each task, from
its ports, before the task is built (`HealthSpec.resolve`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import ValidationError

from frameworks.errors import DriverError
from protocol.wire.codec import describe_validation
from protocol.wire.messages import CommandCheck, HealthCheck, HealthCheckType, HTTPCheck, TCPCheck

FORMS = "http:PORT[/PATH], tcp:PORT or cmd:COMMAND (PORT: a number, or $PORT0, $PORT1, ...)"
_GIVEN_PORT = re.compile(r"\$?PORT([0-9]{1,4})")
_UNRESOLVED = 1  # a check's port until its task's is known (never sent)


class HealthSpecError(DriverError, ValueError):
    """The text is not a health check; says what is wrong (a DriverError, as every error
    the SDK raises; a ValueError, as bad text is)."""


@dataclass(frozen=True)
class HealthSpec:
    """A health check as written: `check`, and which of its task's ports it checks
    (`port_index`: `$PORT<index>`; None: the port written in `check`)."""

    check: HealthCheck
    port_index: int | None = None

    @property
    def ports_needed(self) -> int:
        """How many ports its task must be given for it to name one of them."""
        return 0 if self.port_index is None else self.port_index + 1

    def resolve(self, ports: list[int]) -> HealthCheck:
        """The check of a task given `ports` (lowest first, as PORT0, PORT1, ...)."""
        if self.port_index is None:
            return self.check
        if self.port_index >= len(ports):
            raise HealthSpecError(
                f"the check names $PORT{self.port_index}, but the task is given "
                f"{len(ports)} port{'s' if len(ports) != 1 else ''}"
            )
        port = ports[self.port_index]
        check = self.check
        if check.http is not None:
            return check.model_copy(update={"http": check.http.model_copy(update={"port": port})})
        assert check.tcp is not None  # (only an HTTP or TCP check names a port)
        return check.model_copy(update={"tcp": TCPCheck(port=port)})


def parse_health_check(text: str, **timing: float | int) -> HealthCheck:
    """`text`, with a port number (not a task's `$PORTn`), as a HealthCheck; `timing`: any
    of HealthCheck's `delay_seconds`, `interval_seconds`, `timeout_seconds`,
    `grace_period_seconds`, `consecutive_failures` (the rest are its defaults, Mesos's)."""
    return parse_health_spec(text, **timing).resolve([])


def parse_health_spec(text: str, **timing: float | int) -> HealthSpec:
    """`text` as a HealthSpec (its port a number or one of its task's); `timing` as
    `parse_health_check`'s."""
    kind, sep, rest = text.partition(":")
    kind = kind.strip().lower()
    if not sep or not rest.strip():
        raise HealthSpecError(f"{text!r}: expected {FORMS}")
    fields: dict[str, object] = {}
    index = None
    if kind == "cmd":
        fields = {"type": HealthCheckType.COMMAND, "command": CommandCheck(value=rest)}
    elif kind in ("http", "tcp"):
        port_text, slash, path = rest.partition("/")
        if (given := _GIVEN_PORT.fullmatch(port_text)) is not None:
            index, port = int(given[1]), _UNRESOLVED
        elif port_text.isdigit():
            port = int(port_text)
        else:
            raise HealthSpecError(f"{text!r}: the port is a number or $PORTn (expected {FORMS})")
        if kind == "tcp" and slash:
            raise HealthSpecError(f"{text!r}: a TCP check has a port only")
        try:
            fields = (
                {"type": HealthCheckType.HTTP, "http": HTTPCheck(port=port, path="/" + path)}
                if kind == "http"
                else {"type": HealthCheckType.TCP, "tcp": TCPCheck(port=port)}
            )
        except ValidationError as e:
            raise HealthSpecError(f"{text!r}: {describe_validation(e)}") from None
    else:
        raise HealthSpecError(f"{text!r}: {kind!r} is not a kind of check ({FORMS})")
    try:
        return HealthSpec(HealthCheck.model_validate({**fields, **timing}), index)
    except ValidationError as e:
        raise HealthSpecError(f"{text!r}: {describe_validation(e)}") from None
