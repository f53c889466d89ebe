"""A CA file that cannot be read: a newcomer gave `--ca` (or DRFMESOS_CA) a path with a
typo, and `drfmesos state` and `drfmesos run` waited silently for ever (the bus's
connection task had died of the FileNotFoundError; nothing said so, not even at debug).
The commands now refuse the option at once, naming it, and a party or an SDK driver
given such a URL stops with why (BrokerRefused) instead of waiting."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cluster.cli import main
from frameworks import BrokerRefused, Scheduler, SchedulerDriver
from protocol.tooling.brokers import BrokerURL


@pytest.mark.parametrize("command", [["state"], ["run", "--", "true"], ["why", "x"]])
def test_a_command_names_the_ca_it_cannot_read(command: list[str], tmp_path: Path) -> None:
    missing = tmp_path / "ca.pem"
    url = "mqtts://ops@127.0.0.1:1"  # (never reached: refused before)
    done = CliRunner().invoke(main, [*command[:1], "--broker", url, "--ca", str(missing),
                                     *command[1:]])  # fmt: skip
    assert done.exit_code == 2, done.output
    assert "Invalid value for --ca: cannot read the CA certificate" in done.output
    assert str(missing) in done.output


def test_a_command_names_the_secret_file_it_cannot_read(tmp_path: Path) -> None:
    missing = tmp_path / "ops"
    url = "mqtts://ops@127.0.0.1:1"
    done = CliRunner().invoke(main, ["state", "--broker", url, "--secret-file", str(missing)])
    assert done.exit_code == 2, done.output
    assert "Invalid value for --secret-file: cannot read the secret file" in done.output


async def test_a_driver_given_an_unreadable_ca_stops_with_why(tmp_path: Path) -> None:
    url = BrokerURL.parse("mqtts://ops@127.0.0.1:1", ca=str(tmp_path / "ca.pem"))
    driver = SchedulerDriver(Scheduler(), name="x", broker=url)
    began = time.monotonic()
    with pytest.raises(BrokerRefused, match="cannot read the CA certificate"):
        await driver.start(timeout=20)
    assert time.monotonic() - began < 5  # (at once: not after its timeout)
