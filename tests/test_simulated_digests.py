"""The simulator's results for the benchmarks' variants are the code's, to the byte: what
`benchmarks.simulator` runs beside the published specs (frameworks with and without
`min_offer`, slots, CPU-only, issue 25's tree with short tasks and preemption on), whose
results no published file holds, and the offers made and declined, which none reports.
Each variant's timeline, summary, why.json and counts are hashed and compared with
tests/simulated_digests.json. A speed-up must leave them as they are; a change that
means to move them writes them anew (`DRFMESOS_DIGESTS=write python -m pytest
tests/test_simulated_digests.py`) and says why in its commit. (The 400-node §7.3 trace
and FB-2010 take minutes: the published results and compare.md hold those.)"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from cluster.experiments.simulator import simulate
from cluster.experiments.spec import Duration, Master, load_spec

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "experiments"
DIGESTS = Path(__file__).resolve().parent / "simulated_digests.json"

# (spec, master settings over the spec's, min_offer for every framework or None as the
# spec has it, tasks shortened to 0.05-0.15 s as benchmarks.simulator's tree run)
VARIANTS: dict[str, tuple[str, dict[str, Any], bool | None, bool]] = {
    "paper-7.2 drf": ("paper-7.2", {"policy": "drf"}, False, False),
    "paper-7.2 drf + min_offer": ("paper-7.2", {"policy": "drf"}, True, False),
    "paper-7.2 slots 4": ("paper-7.2", {"policy": "slots", "slots_per_node": 4}, False, False),
    "paper-7.2 cpu + min_offer": ("paper-7.2", {"policy": "cpu"}, True, False),
    "paper-7.1 wdrf": ("paper-7.1", {"policy": "wdrf"}, None, False),
    "lecture-mirrored + min_offer": ("lecture-mirrored", {}, True, False),
    "lecture-flattening": ("lecture-flattening", {}, None, False),
    "hdrf-saturated-leaf, short tasks": ("hdrf-saturated-leaf", {}, None, True),
}


def digest(name: str, tmp: Path) -> str:
    spec_name, master, min_offer, short = VARIANTS[name]
    spec = load_spec(EXAMPLES / f"{spec_name}.yaml")
    spec.master = Master.model_validate({**spec.master.model_dump(), **master})
    for fw in spec.frameworks:
        if min_offer is not None:
            fw.min_offer = min_offer
        if short:
            fw.duration = Duration.model_validate({"uniform": [0.05, 0.15]})
    results, speed = simulate(spec)
    results.write(tmp)
    counts = {k: speed[k] for k in ("task_events", "offers", "declines")}
    h = hashlib.sha256(json.dumps(counts).encode())
    for part in ("timeline.csv", "summary.json", "why.json"):
        path = tmp / part
        h.update(part.encode() + (path.read_bytes() if path.exists() else b"-"))
    return f"{h.hexdigest()} {counts['offers']} offers, {counts['declines']} declined"


@pytest.mark.slow(30)
def test_the_benchmarks_variants_simulate_to_the_same_bytes(tmp_path: Path) -> None:
    made = {name: digest(name, tmp_path / str(i)) for i, name in enumerate(VARIANTS)}
    if os.environ.get("DRFMESOS_DIGESTS") == "write":
        DIGESTS.write_text(json.dumps(made, indent=2) + "\n")
    kept = json.loads(DIGESTS.read_text())
    moved = {name: (kept.get(name), now) for name, now in made.items() if kept.get(name) != now}
    assert not moved, f"simulated results moved (kept, now): {moved}"
