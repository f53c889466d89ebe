"""A misspelt resource in a quota -- `cpu: 2` for `cpus: 2` in the sharing tutorial's
roles file, or `drfmesos quota set ROLE --limit cpu:3` -- was taken as it stood: `drfmesos
roles check` said "3 roles, fine" and the quota set, and it limited a resource no slave
offers, so nothing. The slave refuses the same typo in its --resources ("unknown
resource 'cpu': did you mean cpus?"); a quota must too, before anything is changed."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from cluster.cli import main
from protocol.tooling.ports import free_port


def test_roles_check_refuses_a_misspelt_resource(tmp_path: Path) -> None:
    roles = tmp_path / "roles.yaml"
    roles.write_text(
        "roles:\n  eng: {weight: 1}\n  eng/batch: {weight: 1, quota: {limit: {cpu: 2}}}\n"
    )
    checked = CliRunner().invoke(main, ["roles", "check", str(roles)])
    assert checked.exit_code != 0, checked.output
    assert "did you mean cpus?" in checked.output, checked.output


def test_quota_set_refuses_a_misspelt_resource_before_it_calls() -> None:
    nobody = f"mqtt://127.0.0.1:{free_port()}"  # (refused before it connects)
    for flag in ("--limit", "--guarantee"):
        said = CliRunner().invoke(main, ["quota", "set", "eng", flag, "cpu:3", "--broker", nobody])
        assert said.exit_code == 2, said.output
        assert "did you mean cpus?" in said.output, said.output


def test_a_custom_resource_far_from_the_known_ones_is_still_taken(tmp_path: Path) -> None:
    roles = tmp_path / "roles.yaml"
    roles.write_text("roles:\n  eng: {weight: 1, quota: {limit: {licenses: 4}}}\n")
    checked = CliRunner().invoke(main, ["roles", "check", str(roles)])
    assert checked.exit_code == 0, checked.output
