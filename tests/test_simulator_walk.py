"""The simulator reads a spec once into what each stage needs (issue 46): followed from
`simulate`, the spec comes back into a module it had left at most 6 times.

What is counted (`harness.walk`): the spec and every pydantic model inside it (its master,
cluster, run, frameworks, their quotas, preemption and durations) are followed by identity
while `simulate` runs; plain values read out of them (a policy's name, a number, a
`Resources`, `Spec.setting`'s) are the reading stage's own and are not followed. A module
holds the spec while one of its frames has one of those objects as a local variable (an
argument or a name bound in its body; `self.spec` read through `self` does not count).
Each function is followed once, as a reader walks the code: the walk notes a module when a
function holding the spec is first entered, and when that first call returns to a caller
holding it too (consecutive notes of one module are one stay). A re-entry is a stay in a
module the walk had left before, whether the spec climbed back up to a caller there or
was passed down into it again; a climb is a re-entry by a return. Measured so: 10
re-entries (6 climbs) for blog-same-demands and 12 (7) with preemption on while the ideal
timeline read the spec once per question (`Results.with_ideal`, then limits, pool weights
and settle time) and the simulator read roles, slaves, quotas and preemption each
separately; 5 (4) since.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.experiments.simulator import simulate
from cluster.experiments.spec import load_spec

from harness.walk import walk

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "experiments"
MOST = 6


@pytest.mark.parametrize("name", ["blog-same-demands", "lecture-morning-preemption", "paper-ceei"])
def test_the_spec_followed_from_simulate_comes_back_into_a_module_at_most_six_times(
    name: str,
) -> None:
    spec = load_spec(EXAMPLES / f"{name}.yaml")
    followed = walk(spec, lambda: simulate(spec))
    assert followed.steps[0] == "cluster/experiments/simulator.py"  # (it did follow it)
    reentries = followed.reentries()
    assert len(reentries) <= MOST, f"{len(reentries)} re-entries: {followed.steps}"
    assert len(followed.climbs()) <= len(reentries)
