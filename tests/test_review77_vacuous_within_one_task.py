"""Review 77: summary.json says a run is "within one task" of the ideal when it measured
nothing, even where a framework got no task at all.

Scenario: two published specs, simulated as the docs run them.

- `lecture-morning-preemption.yaml --preemption off` (published as
  `results/lecture-morning-off-sim`): the lecture's morning without preemption. The docs'
  own table says C "never runs" (0 tasks in 900 s); its DRF ideal is a third of the
  cluster (about 10 of its 2-CPU tasks).
- `lecture-collusion-honest.yaml`: the lecture's collusion, honest, its node split into 8
  (as the spec was until review 93 pooled it). The ideal gives op4 2/3 of the network (53.3
  tasks); the run settles at 44.

The source: the paper's Theorem 7 bounds the discrete allocation's gap to the continuous
one by one max-task; the docs (docs/explanation/experiments.md, "The ideal beside the
real") say every run reports "in summary.json how far the run strays from it, in tasks,
once each phase has settled ... where a task is large beside a node the gap can be
wider, and the summary says so rather than hide it".

drfmesos gives: `distance_from_ideal` = `{"frameworks": {}, "within_one_task": true}` for
both. A phase "settles" only after the longest task's duration (here 1500 s and 10,000
s: tasks that never end, the worked examples' way of letting the allocation settle),
which is past the run's end, so no sample is measured and `all([])` is True. The same
vacuous True is published for lecture-mirrored, both collusion specs, paper-9-18, both
paper-asset and both CEEI runs and the three simulated morning runs; among them the
mirrored and collusion specs, which the docs show parting from the ideal by 4 to 10 tasks.

Why a user relies on it: the summary's verdict is what a user (and
tests/test_experiments.py's check of it) reads to decide whether a replay met the
paper's bound; a verdict of "within one task" for a framework starved to zero says the
opposite of what happened.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.experiments.simulator import simulate
from cluster.experiments.spec import SlaveGroup, load_spec
from protocol.wire.resources import Resources

EXAMPLES = Path(__file__).parent.parent / "examples" / "experiments"


@pytest.mark.parametrize(
    ("name", "off", "framework", "nodes"),
    [
        ("lecture-morning-preemption", True, "C", None),
        ("lecture-collusion-honest", False, "op4", 8),
    ],
)
def test_a_run_far_from_its_ideal_is_not_reported_within_one_task(
    name: str, off: bool, framework: str, nodes: int | None
) -> None:
    spec = load_spec(EXAMPLES / f"{name}.yaml")
    if off:
        spec.master.preemption = None  # as `--preemption off`
    if nodes is not None:  # its one node cut into `nodes` equal ones
        (group,) = spec.cluster.slaves
        node = Resources({k: v / nodes for k, v in group.resources.items()})
        spec.cluster.slaves = [SlaveGroup(count=nodes, resources=node)]
    results = simulate(spec)[0]
    summary = results.summary()
    last = [s for s in results.samples if s.framework == framework][-1]
    ideal = summary["ideal"][-1]["tasks"][framework]
    assert ideal - last.running_tasks > 5, (ideal, last)  # far from the ideal, really
    distance = summary["distance_from_ideal"]
    assert distance["within_one_task"] is not True, distance
