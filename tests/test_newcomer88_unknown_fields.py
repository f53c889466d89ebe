"""Newcomer 88: a misspelt field of a roles file or an experiment spec was refused as
"Extra inputs are not permitted", where a misspelt resource name says "did you mean
cpus?". The newcomer's `wieght: 2` in the sharing tutorial's roles.yaml, `role:` for
`roles:`, and `duraton:` in a copied spec now name the field meant.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from cluster.cli import main
from cluster.experiments.spec import SpecError, load_spec


def check_roles(tmp_path: Path, text: str) -> str:
    path = tmp_path / "roles.yaml"
    path.write_text(text)
    run = CliRunner().invoke(main, ["roles", "check", str(path)])
    assert run.exit_code == 1, run.output
    return run.output


def test_a_misspelt_field_of_a_roles_file_names_the_one_meant(tmp_path: Path) -> None:
    said = check_roles(tmp_path, "roles:\n  eng: {weight: 1}\n  eng/web: {wieght: 2}\n")
    assert "roles.eng/web.wieght: unknown field: did you mean weight?" in said
    said = check_roles(tmp_path, "role:\n  eng: {weight: 1}\n")
    assert "role: unknown field: did you mean roles?" in said
    said = check_roles(tmp_path, "roles:\n  eng: {quota: {limt: {cpus: 2}}}\n")
    assert "roles.eng.quota.limt: unknown field: did you mean limit?" in said


def test_a_field_in_the_wrong_place_is_not_said_to_be_misspelt(tmp_path: Path) -> None:
    said = check_roles(tmp_path, "roles:\n  eng: {weight: 1, roles: {}}\n")
    assert "roles.eng.roles: not a field here" in said
    assert "did you mean" not in said


def test_a_misspelt_field_of_an_experiment_spec_names_the_one_meant(tmp_path: Path) -> None:
    spec = Path("examples/experiments/paper-7.1.yaml").read_text()
    path = tmp_path / "spec.yaml"
    path.write_text(spec.replace("tasks_per_offer: fill", "task_per_offer: fill", 1))
    meant = "frameworks.0.task_per_offer: unknown field: did you mean tasks_per_offer?"
    with pytest.raises(SpecError, match=re.escape(meant)):
        load_spec(path)
