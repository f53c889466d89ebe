"""An operator's command pointed at something that takes the connection but never answers
as a broker -- the newcomer's `mqtt://` to the sharing tutorial's TLS broker on 8883, or a
firewall -- must say so once its one attempt has waited for an answer, not after three
such waits (some 32 s for `drfmesos state --broker mqtt://127.0.0.1:8883 --timeout 3`):
a second attempt at a listener that did not answer meets the same silence.
(docs/how-to/troubleshooting.md: "A command run once does not wait for a broker".)"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from cluster.cli import main
from protocol.transport.mqtt_client import ANSWER_TIMEOUT


@pytest.fixture
def silent() -> Iterator[str]:
    """A TCP listener that never accepts: connections complete in its backlog, and nothing
    ever answers them."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"mqtt://127.0.0.1:{listener.getsockname()[1]}"


@pytest.mark.slow(12)
@pytest.mark.parametrize("command", [["state"], ["why", "fw-1"]])
def test_a_listener_that_never_answers_is_said_after_one_wait(
    silent: str, command: list[str]
) -> None:
    began = time.monotonic()
    result = CliRunner().invoke(main, [*command, "--broker", silent, "--timeout", "3"])
    took = time.monotonic() - began
    assert result.exit_code == 1, result.output
    assert f"cannot reach the broker at {silent}: no MQTT answer" in result.output
    assert "mqtts://" in result.output  # (what to try)
    assert took < ANSWER_TIMEOUT + 5, f"{took:.1f} s"
