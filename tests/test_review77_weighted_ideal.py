"""Review 77: the experiments' ideal ignores the weights the allocator applies under `drf`
and `wdrf`.

Scenario: the lecture's weights case, written as a user writes it: a spec with two
frameworks of mirrored demands on 8 nodes of <8 CPU, 8 GB> (A <0.5 CPU, 256 MB>, B <0.25
CPU, 512 MB>), the master's policy `drf` (or `wdrf`) and `master.weights: {A: 2}` -- a
role's weight, as the sharing tutorial and Mesos set it. `drfmesos simulate` draws the
ideal dashed and reports the distance from it in summary.json; `drfmesos ideal SPEC`
prints it.

The sources: the paper's weighted DRF (s_i = max_j u_ij / w_ij; with equal weights per
resource, dominant shares end in the ratio of the weights) and the lecture (serve the
operation with the smallest u_k / w_k; fairness is u_k >= w_k). Here: A 4/5, B 2/5 of
their dominant resources (x = 2y on the CPUs: 5y/256 = 1).

drfmesos gives: the allocator weighs A (the run climbs to A 0.75, B 0.50 by 300 s, and
preemption's fair shares map `drf` to `wdrf` with role weights), but the experiments'
ideal (`ideal_timeline.ideal_of`, `ideal_cli.spec_ideal`) hands `ideal()` the policy's
name as it is: under `drf` it ignores every weight ("weights ignored"), and under `wdrf`
it reads only a framework's own `weight:`, not the roles' (`master.weights`, which reach
the ideal only as tree pools). Both print A 2/3, B 2/3 -- the unweighted answer -- and
the summary measures the weighted run against it (A "9.5 tasks" off). The same spec under
`hdrf`, or under `wdrf` with `weight: 2` on the framework, gives 4/5 and 2/5.

Why a user relies on it: the dashed line and the summary's distance are how a replay is
judged against the source; a weighted replay judged against the unweighted ideal says the
allocator is wrong when it is the yardstick.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from cluster.experiments.ideal_cli import spec_ideal
from cluster.experiments.simulator import simulate
from cluster.experiments.spec import Spec


def weighted(policy: str) -> Spec:
    return Spec.model_validate(
        {
            "name": "lecture-weights",
            "cluster": {"slaves": [{"count": 8, "resources": {"cpus": 8, "mem": 8192}}]},
            "master": {
                "policy": policy,
                "allocation_interval": 1,
                "refuse_seconds": 1,
                "weights": {"A": 2},
            },
            "frameworks": [
                {"name": "A", "task": {"cpus": 0.5, "mem": 256}, "duration": {"fixed": 15}},
                {"name": "B", "task": {"cpus": 0.25, "mem": 512}, "duration": {"fixed": 15}},
            ],
            "run": {"duration": 60, "seed": 1, "sample_interval": 2},
        }
    )


@pytest.mark.parametrize("policy", ["drf", "wdrf"])
def test_the_ideal_of_a_weighted_drf_spec_follows_the_weights(policy: str) -> None:
    spec = weighted(policy)
    shares = {name: s.dominant_share for name, s in spec_ideal(spec, policy).items()}
    timeline = simulate(spec)[0].summary()["ideal"][-1]["dominant_share"]
    assert shares == {"A": Fraction(4, 5), "B": Fraction(2, 5)}, shares
    assert timeline == pytest.approx({"A": 0.8, "B": 0.4}), timeline
