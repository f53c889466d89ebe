"""An operator's command run as another kind of principal (a team's framework principal,
say) hears nothing, and says it takes an operator principal. It used to add "is 'alice'
one (drfmesos auth add alice --kind operator)?": a command that fails for alice, who
exists ("principal 'alice' exists: remove it first"), and that tells a tenant to make
itself an operator. It must point at what tells the kinds apart (`drfmesos auth list`)
and at an operator's principal instead."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from cluster.cli import main
from cluster.local.reaching import no_master
from cluster.local.secure import provision
from protocol.tooling.brokers import BrokerURL


def test_the_operator_hint_names_no_command_that_fails(tmp_path: Path) -> None:
    store = tmp_path / "auth"
    provision(store, [("alice", "framework")])
    again = CliRunner().invoke(main, ["auth", "add", str(store), "alice", "--kind", "operator"])
    assert again.exit_code != 0  # (what the hint used to say to run)
    hint = no_master(BrokerURL.parse("mqtts://alice@127.0.0.1:8883"), "c", "answered", 10)
    assert "takes an operator principal" in hint
    assert "auth add alice" not in hint, hint
    assert "drfmesos auth list" in hint, hint
