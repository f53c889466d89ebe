"""Review 77: the paper's §7.1 second phase never equalises: it locks at 40/60.

Scenario: `examples/experiments/paper-7.1.yaml`, as the tutorial runs it, with its second
phase (job 1 <2 CPU, 4 GB>, job 2 <1 CPU, 3 GB>, both CPU-bound) left to run for ten
minutes instead of two: tasks of 10-20 s, so every task of the first phase has ended
within 20 s of the switch and the allocation has turned over some forty times.

The source: the paper's §7.1 (Figure 8) -- "both jobs' dominant resource is CPU, so DRF
equalizes their CPU shares ... DRF switches allocations dynamically by having Mesos offer
resources to the job with the smallest dominant share as tasks finish". The ideal is 1/2
each (48 and 96 tasks; `drfmesos ideal` says so too). The docs
(docs/explanation/experiments.md, §7.1) claim the replay shows the paper's shape, its
second phase only "slow" to converge.

drfmesos gives: from 30 s after the switch, job 1 holds 38 tasks (39.6% of the CPUs)
and job 2 116 (60.4%), sample after sample, unchanged for the whole ten minutes (and the
published 360 s run is frozen the same way from 150 s to 240 s). It is not slow
convergence but none: a job 2 task ending frees 1 CPU on its node; job 1, the lowest
share, cannot use one CPU (its tasks need 2), so the freed CPU goes straight back to job
2, above its share, before a second CPU can free up beside it. The lower-share job never
gets a 2-CPU hole. The §7.1 distance table's max gaps (11 and 20 tasks) are this phase,
not the 10 GB tasks of the first it is blamed on.

Why a user relies on it: §7.1 is the tutorial's first replay and the paper's flagship
picture of DRF adapting to changing demands; a user comparing policies or tuning the
master reads a 40/60 split of a CPU-bound pair as DRF's answer, and it is not (the same
lock starves any framework with larger tasks than its neighbours, as the blog's 2500 MB
case hints).
"""

from __future__ import annotations

from pathlib import Path

from cluster.experiments.simulator import simulate
from cluster.experiments.spec import load_spec

SPEC = Path(__file__).parent.parent / "examples" / "experiments" / "paper-7.1.yaml"


def test_the_paper_71_cpu_bound_phase_equalises_dominant_shares() -> None:
    spec = load_spec(SPEC)
    for framework in spec.frameworks:  # the second phase lasts 10 minutes, the third never comes
        framework.changes = framework.changes[:1]
        assert framework.changes[0].at == 120
    spec.run.duration = 720
    results = simulate(spec)[0]
    late = [s for s in results.samples if s.time >= 420]  # 5 minutes past the switch
    share = {
        name: sum(s.dominant_share for s in late if s.framework == name)
        / sum(1 for s in late if s.framework == name)
        for name in ("job1", "job2")
    }
    # the paper: equal CPU shares (1/2 each); within 0.1 allows for a task or two
    # of fragmentation on 4-CPU nodes
    assert abs(share["job1"] - share["job2"]) <= 0.1, share
