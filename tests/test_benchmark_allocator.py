"""`python -m benchmarks.allocator --json` ends with one JSON object: every figure that has
a bound beside it, and whether it holds (issue 51's way of reading a run)."""

from __future__ import annotations

import json

import pytest

from benchmarks import allocator


def test_the_last_line_gives_each_bounded_figure_beside_its_bound(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = allocator.main(quick=True, as_json=True)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1  # (--json: that line alone)
    result = json.loads(lines[-1])
    targets = {t["figure"]: t for t in result["targets"]}
    hdrf = targets["hdrf round, 2,000 slaves, 1,000 roles in 3 levels"]
    fair = targets["exact hdrf fair share, 1,000 frameworks"]
    assert (hdrf["unit"], hdrf["bound"], fair["unit"], fair["bound"]) == ("x", 2.0, "ms", 50.0)
    for target in targets.values():
        assert target["holds"] == (target["value"] <= target["bound"])
    assert result["holds"] == all(t["holds"] for t in targets.values())
    assert code == (0 if result["holds"] else 1)
    assert set(result["tree_round_ms"]) == {"drf", "hdrf", "naive-hdrf", "flat"}
    # issue 49: a round with ports on every slave, beside scalars only, in the same run
    ranges = targets["round with ports on every slave, 2,000 x 200"]
    assert (ranges["unit"], ranges["bound"]) == ("x", 1.3)
    assert len(result["ranges"]["ranges_ms"]) == len(result["ranges"]["scalars_ms"]) == 3
    assert result["ranges"]["offers"] == 2000  # every slave offered, its ports with it
    # Mesos's PersistentVolumes benchmark: reservations and a volume on every slave
    volumes = targets[
        "round with reservations and a volume on every slave (worst of regular, shared,"
        " mixed), 2,000 x 200"
    ]
    assert (volumes["unit"], volumes["bound"]) == ("x", 2.0)
    assert set(result["volumes"]["ratios"]) == {"REGULAR", "SHARED", "MIXED"}
