"""No source file of ours over 600 lines (issue 29): a file that long holds more than one
job."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MOST_LINES = 600


def too_long(package: str) -> dict[str, int]:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for path in sorted((ROOT / package).rglob("*.py"))
    }
    return {name: n for name, n in sizes.items() if n > MOST_LINES}


@pytest.mark.parametrize("package", ["protocol", "master", "slave", "frameworks", "cluster"])
def test_no_source_file_over_600_lines(package: str) -> None:
    assert too_long(package) == {}
