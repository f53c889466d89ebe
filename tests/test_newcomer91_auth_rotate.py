"""An operator replaces a team's leaked secret. The docs' remedy was `auth remove` then
`auth add`, which dropped the principal's grants (a team's RESERVE, given with `auth
grant`) and had its roles typed again; `auth rotate` changes the secret alone."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from cluster.cli import main
from protocol.tooling.credentials import Store, read_passwd, verify_secret


def test_rotate_replaces_the_secret_and_keeps_roles_and_grants(tmp_path: Path) -> None:
    auth = str(tmp_path / "auth")
    runner = CliRunner()
    assert runner.invoke(main, ["auth", "init", auth]).exit_code == 0
    add = ["auth", "add", auth, "team-a", "--kind", "framework", "--roles", "a,b"]
    added = runner.invoke(main, [*add, "--secret-file"])
    assert added.exit_code == 0
    assert runner.invoke(main, ["auth", "grant", auth, "team-a", "reserve"]).exit_code == 0
    before = Store.open(Path(auth)).principals["team-a"]
    old = added.output.strip().splitlines()[-1]

    rotated = runner.invoke(main, ["auth", "rotate", auth, "team-a", "--secret-file"])

    assert rotated.exit_code == 0, rotated.output
    new = rotated.output.strip().splitlines()[-1]
    hashed = read_passwd(Path(auth) / "passwd")["team-a"]
    assert verify_secret(new, hashed)
    assert not verify_secret(old, hashed)
    assert (Path(auth) / "secrets" / "team-a").read_text().strip() == new
    after = Store.open(Path(auth)).principals["team-a"]
    assert after == before
    assert after.may("reserve", "a")

    unknown = runner.invoke(main, ["auth", "rotate", auth, "nobody"])
    assert unknown.exit_code == 1
    assert "no principal 'nobody'" in unknown.output
    assert "Traceback" not in unknown.output
