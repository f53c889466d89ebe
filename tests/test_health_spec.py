"""`drfmesos run --health-check`'s short form of a health check (frameworks.health_spec):
each kind and its timing, and every text that is not one refused with a reason."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from frameworks.health_spec import HealthSpecError, parse_health_check, parse_health_spec
from protocol.wire.messages import HealthCheckType


def test_each_kind_and_its_timing() -> None:
    http = parse_health_check("http:8080/healthz", interval_seconds=2, consecutive_failures=5)
    assert http.type == HealthCheckType.HTTP
    assert http.http is not None
    assert (http.http.port, http.http.path) == (8080, "/healthz")
    assert (http.interval_seconds, http.consecutive_failures) == (2, 5)
    assert parse_health_check("http:80").http.path == "/"  # type: ignore[union-attr]
    tcp = parse_health_check("tcp:5432")
    assert tcp.tcp is not None
    assert tcp.tcp.port == 5432
    cmd = parse_health_check("cmd:test -f ready && curl -s localhost:1/x")
    assert cmd.command is not None
    assert cmd.command.value == "test -f ready && curl -s localhost:1/x"  # (colons kept)
    assert cmd.delay_seconds == 15.0  # Mesos's defaults otherwise


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "expected"),
        ("http", "expected"),
        ("cmd:", "expected"),
        ("ftp:21", "not a kind of check"),
        ("http:port/x", "port is a number"),
        ("http:$PORT/x", "port is a number or"),
        ("tcp:$PORTS", "port is a number or"),
        ("http:0", "port"),
        ("http:70000", "port"),
        ("tcp:22/x", "a port only"),
        ("http:80/a b", "path"),
    ],
)
def test_what_is_not_a_check_is_refused_saying_why(text: str, said: str) -> None:
    with pytest.raises(HealthSpecError, match=said):
        parse_health_check(text)


def test_a_check_of_a_given_port_is_resolved_from_its_tasks_ports() -> None:
    http = parse_health_spec("http:$PORT1/up", interval_seconds=2)
    assert (http.port_index, http.ports_needed) == (1, 2)
    check = http.resolve([31000, 31007])
    assert check.http is not None
    assert (check.http.port, check.http.path, check.interval_seconds) == (31007, "/up", 2)
    tcp = parse_health_spec("tcp:PORT0").resolve([31002])  # (the `$` may be left out)
    assert tcp.tcp is not None
    assert tcp.tcp.port == 31002
    assert parse_health_spec("tcp:22").resolve([31000]).tcp.port == 22  # type: ignore[union-attr]
    with pytest.raises(HealthSpecError, match=r"names \$PORT1, but the task is given 1 port"):
        http.resolve([31000])
    with pytest.raises(HealthSpecError, match="given 0 ports"):
        parse_health_check("http:$PORT0/")  # (a HealthCheck as such holds a number)


def test_timing_out_of_bounds_is_refused() -> None:
    with pytest.raises(HealthSpecError, match="interval_seconds"):
        parse_health_check("tcp:1", interval_seconds=0.1)


@given(st.integers(1, 65535), st.from_regex(r"/[\x21-\x7e]{0,40}", fullmatch=True))
def test_any_http_check_reads_back_as_written(port: int, path: str) -> None:
    check = parse_health_check(f"http:{port}{path}")
    assert check.http is not None
    assert (check.http.port, check.http.path) == (port, path if path else "/")


@given(st.text(max_size=40))
def test_any_text_is_a_check_or_refused_never_a_crash(text: str) -> None:
    with contextlib.suppress(HealthSpecError):
        parse_health_check(text)
