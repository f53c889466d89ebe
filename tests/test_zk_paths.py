"""`--zk` and `--zk-mesos-path` kept apart: Mesos clients take the lowest child of theirs
as the leader, so a registry node beside the `json.info_` nodes hides the leader."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from master.cli import master as master_command
from master.mesos_api.leader_info import path_clash


@pytest.mark.parametrize(
    ("registry", "mesos"),
    [("/mesos", "/mesos"), ("/mesos/", "/mesos"), ("/mesos/drfmesos", "/mesos"),
     ("/", "/mesos"), ("/drfmesos", "/drfmesos/mesos")],
)  # fmt: skip
def test_paths_that_share_a_subtree_clash(registry: str, mesos: str) -> None:
    assert path_clash(registry, mesos)


@pytest.mark.parametrize(
    ("registry", "mesos"), [("/drfmesos", "/mesos"), ("/mesosx", "/mesos"), ("/a/b", "/a/c")]
)
def test_paths_apart_are_fine(registry: str, mesos: str) -> None:
    assert path_clash(registry, mesos) is None


def test_the_master_refuses_the_registry_in_the_mesos_path_before_it_connects() -> None:
    """Mesos's usual `--zk zk://HOST/mesos`: refused at once, with the way out (nothing
    listens on port 1, so a master that went on would fail otherwise)."""
    out = CliRunner().invoke(master_command, ["--zk", "zk://127.0.0.1:1/mesos"])
    assert out.exit_code == 2, out.output
    assert "zk://HOST:PORT/drfmesos" in out.output
