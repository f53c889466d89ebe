"""The `drfmesos` command line as a new operator types it: a value the call cannot carry
(a grace past the hour a message may say, an id past its 200 characters) is an error
message naming the option or argument and a failing exit status, as click says of any
bad value -- never a Python traceback. These fail before anything is sent: no broker is
needed (the one named refuses connections)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from cluster.cli import main

NOWHERE = ["--broker", "mqtt://127.0.0.1:1", "--timeout", "1"]
LONG_ID = "x" * 201

BAD_VALUES = [
    ["slaves", "drain", "slave-1", "--grace-period", "4000"],  # over MAX_KILL_GRACE
    ["slaves", "drain", LONG_ID],
    ["slaves", "deactivate", LONG_ID],
    ["slaves", "reactivate", LONG_ID],
    ["slaves", "gone", LONG_ID],
    ["teardown", LONG_ID],
    ["reserve", LONG_ID, "cpus(r):1"],
    ["unreserve", LONG_ID, "cpus(r,ops):1"],
]


@pytest.mark.parametrize("args", BAD_VALUES, ids=lambda a: " ".join(a)[:40])
def test_a_value_the_call_cannot_carry_is_a_usage_error_not_a_traceback(args: list[str]) -> None:
    result = CliRunner().invoke(main, [*args, *NOWHERE])
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, f"a traceback: {type(result.exception).__name__}: {result.exception}"
    assert result.exit_code in (1, 2), result.output
    assert "Error" in result.output
