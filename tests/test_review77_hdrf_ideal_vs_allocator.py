"""Review 77: on the lecture's own tree, hdrf's ideal and hdrf's allocator part from the
start, and the docs blame a leaf that left and came back.

Scenario: `lecture-naive-hdrf.yaml` under its own policy, `hdrf` (the master's default),
with p/y's framework running throughout (nobody leaves or returns): x (CPU tasks)
beside pool p, whose leaves p/y (CPU tasks) and p/z (memory tasks) share p's half. Run
as the spec has it, and with z's tasks memory alone (the lecture's vectors exactly).

The sources and the docs: the lecture's min-satisfaction HDRF ("compare usage over weight
in this node and in both its children ... it gives everyone at least the promised
share"); docs/explanation/experiments.md, "The ideal beside the real": the tree
policies' ideal "fills the role tree the way the allocator serves it"
(`master/allocation/tree_ideal.py`: "Resources go ... where the allocator would send
them"), and the gap a tree run reports is put down to path dependence: "after a leaf
leaves and returns it settles where every node is equally far above its promise, which
need not be where it starts from scratch".

drfmesos gives: from scratch, no leaf leaving, the ideal and the run disagree by 2 to 13
tasks, the run settled within a few minutes and unchanged to its end:

| z's task | ideal x / p/y / p/z | run x / p/y / p/z |
|---|---|---|
| <0.1 CPU, 1 GB> (the spec) | 16 / 14.5 / 14.5 | 19 / 9 / 28 |
| <1 GB> (the lecture's) | 16.5 / 15.5 / 30 | 21 / 11 / 28 |

The run passes through the ideal and leaves it: with the lecture's vectors it holds x 16,
p/y 16, z 28 at 20 s, then, as tasks turn over (20-40 s each), every CPU p/y frees goes
to x until x's and p/y's satisfactions meet (x 21/32 over 1/2 and p/y 11/32 over 1/4:
1.31 and 1.38), x twice p/y's CPU. Both sides count pool p's own satisfaction
(role_tree._key: "the pool's own promise counts too"), but once z holds the memory
p's own satisfaction is 1.75, so at the ideal's end state the root weighs x (16/32 over
1/2: 1.0) against p (the lower of 1.75 and p/y's 2.0) and x is served first whenever a
CPU frees, until x's satisfaction has climbed to p/y's falling one. The
ideal is where a progressive fill stops, not where the allocator's own rule settles once
tasks come and go. Min satisfaction is path dependent, as the docs say -- but here from
scratch, on the lecture's own tree, with no leaf leaving, and the tree ideal is then not
"the way the allocator serves it". The summary's distance (p/y 5.5 tasks) measures that.

Why a user relies on it: hdrf is the master's default policy and the lecture's tree the
docs' showcase for it; a user deciding whether the allocator keeps the lecture's
promises reads the dashed ideal and the summary's distance, and from scratch they say
the allocator strays when it is the ideal and the allocator that differ; which of the two
the lecture's min satisfaction means here, x 2/3 or x 1/2 of the CPUs, the docs do not say.

Resolved (the ideal): hdrf's ideal is where its allocator settles as tasks turn over --
the filling made again with each pool's own satisfaction where the last one ended, until
it ends where it started (`tree_ideal._settle`) -- since the lecture promises each leaf
at least its share (x 1/2, p/y 1/4), which x 2/3 and p/y 1/3 keep, and no more. With the
lecture's vectors the ideal is x 21.3, p/y 10.7, z 30 and the run holds x 21, p/y 11:
within the paper's one task. With the spec's z (<0.1 CPU, 1 GB>) the continuous ideal
stays x 16, p/y 14.5, z 14.5 (z is stopped by the CPU, all of it taken), while on the
nodes z's small tasks fill the CPU that whole-CPU tasks leave over and, with it, the
memory; that discrete gap is the next finding, held here by a strict xfail.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.experiments.simulator import simulate
from cluster.experiments.spec import load_spec
from protocol.wire.resources import Resources

SPEC = Path(__file__).parent.parent / "examples" / "experiments" / "lecture-naive-hdrf.yaml"


SCRAPS = pytest.mark.xfail(
    strict=True,
    reason="review 77, finding 5, what is left: z's tasks of 0.1 CPU take the CPU that "
    "whole-CPU tasks leave on each node, fill the memory no continuous ideal gives them "
    "(28 against 14.5), and p's own satisfaction with it; x then settles at 19 against 16",
)


@pytest.mark.parametrize(
    ("z_task", "within"),
    [pytest.param(None, 2.0, marks=SCRAPS), ({"mem": 1024}, 1.0)],
    ids=["spec", "lecture-vectors"],
)
def test_hdrf_settles_near_its_own_ideal_on_the_lectures_tree_from_scratch(
    z_task: dict[str, float] | None, within: float
) -> None:
    spec = load_spec(SPEC)
    assert spec.master.policy == "hdrf"
    spec.frameworks = [fw for fw in spec.frameworks if fw.name != "y2"]
    for fw in spec.frameworks:
        fw.stop = None  # p/y runs throughout: no leaf leaves or returns
        if fw.name == "z" and z_task is not None:
            fw.task = Resources(z_task)
    spec.run.duration = 600
    summary = simulate(spec)[0].summary()
    assert len(summary["ideal"]) == 1  # one phase: from scratch
    distance = summary["distance_from_ideal"]["frameworks"]
    assert max(distance[name]["mean_tasks"] for name in ("x", "y1")) <= within, distance
