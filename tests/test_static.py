"""The packages stay `ruff` clean and `mypy --strict` clean (pyproject.toml holds the settings)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "ruff", "check", "."],
        [sys.executable, "-m", "ruff", "format", "--check", "."],
        [sys.executable, "-m", "mypy"],
    ],
    ids=["ruff-check", "ruff-format", "mypy-strict"],
)
def test_static_checks_pass(command: list[str]) -> None:
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


# Who may import whom: protocol depends on nothing of ours; master, slave and frameworks on
# protocol only; cluster (and the drfmesos command) sit on top of everything.
ALLOWED = {
    "protocol": {"protocol"},
    "master": {"protocol", "master"},
    "slave": {"protocol", "slave"},
    "frameworks": {"protocol", "frameworks"},
    "cluster": {"protocol", "master", "slave", "frameworks", "cluster"},
}


def test_imports_point_one_way() -> None:
    import ast

    wrong = []
    for package, allowed in ALLOWED.items():
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module]
                for name in names:
                    top = name.split(".")[0]
                    if top in ALLOWED and top not in allowed:
                        wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert not wrong, "\n".join(wrong)
