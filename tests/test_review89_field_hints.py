"""Review 89: a misspelt field's hint names a field of the place it was written, not the
nearest name anywhere in the file. `weight:` under an experiment spec's `master:` (meant
`weights:`) was told "not a field here (it is one elsewhere in the file)" (a framework's
`weight`), and a role's `rols:` was told "did you mean roles?", a field only the file's
top holds, which the person then wrote there and was refused again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.experiments.spec import SpecError, load_spec
from master.roles_file import RolesError, parse_roles


def test_a_misspelt_field_is_matched_against_the_fields_where_it_stands(tmp_path: Path) -> None:
    spec = Path("examples/experiments/paper-7.1.yaml").read_text()
    assert "\nmaster: {" in spec
    path = tmp_path / "spec.yaml"
    path.write_text(spec.replace("\nmaster: {", "\nmaster: {weight: {a: 2}, ", 1))
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    assert "master.weight: unknown field: did you mean weights?" in str(raised.value)


def test_a_role_is_not_told_of_the_files_top_fields() -> None:
    with pytest.raises(RolesError) as raised:
        parse_roles("roles:\n  eng: {rols: 1}\n")
    said = str(raised.value)
    assert "roles.eng.rols: unknown field" in said
    assert "did you mean roles" not in said
