"""A health check in a few characters, as `drfmesos run --health-check` takes it:
`http:PORT[/PATH]`, `tcp:PORT` or `cmd:COMMAND` (Mesos's HTTP, TCP and COMMAND checks),
its timing given beside it (delay, interval, timeout, grace, consecutive failures)."""

from __future__ import annotations

from pydantic import ValidationError

from protocol.wire.codec import describe_validation
from protocol.wire.messages import CommandCheck, HealthCheck, HealthCheckType, HTTPCheck, TCPCheck

FORMS = "http:PORT[/PATH], tcp:PORT or cmd:COMMAND"


class HealthSpecError(ValueError):
    """The text is not a health check; says what is wrong."""


def parse_health_check(text: str, **timing: float | int) -> HealthCheck:
    """`text` as a HealthCheck; `timing`: any of HealthCheck's `delay_seconds`,
    `interval_seconds`, `timeout_seconds`, `grace_period_seconds`,
    `consecutive_failures` (the rest are its defaults, Mesos's)."""
    kind, sep, rest = text.partition(":")
    kind = kind.strip().lower()
    if not sep or not rest.strip():
        raise HealthSpecError(f"{text!r}: expected {FORMS}")
    fields: dict[str, object] = {}
    if kind == "cmd":
        fields = {"type": HealthCheckType.COMMAND, "command": CommandCheck(value=rest)}
    elif kind in ("http", "tcp"):
        port_text, slash, path = rest.partition("/")
        if not port_text.isdigit():
            raise HealthSpecError(f"{text!r}: the port is a number (expected {FORMS})")
        port = int(port_text)
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
        return HealthCheck.model_validate({**fields, **timing})
    except ValidationError as e:
        raise HealthSpecError(f"{text!r}: {describe_validation(e)}") from None
