"""Preemption in simulated time: the lecture's morning with and without it, victims
youngest or oldest first, and no oscillation between frameworks at their fair shares."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.experiments.results import Results
from cluster.experiments.simulator import simulate
from cluster.experiments.spec import Spec, load_spec

EXAMPLES = Path(__file__).parent.parent / "examples" / "experiments"


def morning(preemption: dict[str, object] | None, **task: object) -> Spec:
    """A holds all 8 nodes with tasks that would run an hour; B and C come at 600 s."""
    spec = load_spec(EXAMPLES / "lecture-morning-preemption.yaml")
    data = spec.model_dump(mode="json", exclude_none=True)
    data["master"].pop("preemption", None)
    if preemption is not None:
        data["master"]["preemption"] = preemption
    for fw in data["frameworks"]:
        fw["duration"] = task or {"fixed": 3600}
    data["run"] = {"duration": 900, "seed": 1, "sample_interval": 1}
    return Spec.model_validate(data)


def reached(results: Results, name: str, since: float) -> float | None:
    """When `name` first ran its fair share (the ideal) give or take the rounding of whole
    tasks: one of its own, and one of the victim's, which may not go below its own."""
    for s in results.samples:
        phase = results.ideal_at(s.time)
        if (
            s.framework == name
            and s.time >= since
            and phase is not None
            and s.running_tasks >= phase.tasks[name] - 2
        ):
            return s.time
    return None


def test_without_preemption_the_morning_waits_for_the_nights_tasks() -> None:
    results = simulate(morning(None))[0]
    assert reached(results, "B", 600) is None
    assert reached(results, "C", 600) is None
    assert "preemption" not in results.summary()


def test_with_preemption_each_reaches_its_fair_share_within_timeout_notice_and_a_round() -> None:
    timeout, notice, interval = 30.0, 2.0, 1.0
    results = simulate(morning({"timeout": timeout, "notice": notice}))[0]
    bound = 600 + timeout + notice + interval + 1.0  # + one sample
    for name in ("B", "C"):
        t = reached(results, name, 600)
        assert t is not None, name
        assert t <= bound, (name, t, bound)
    summary = results.summary()
    stats = summary["preemption"]
    assert stats["tasks_preempted"] > 0
    # A is left at or above its fair share (a third), never below
    last = max(s.time for s in results.samples)
    a = next(s for s in results.samples if s.framework == "A" and s.time == last)
    assert a.dominant_share >= 1 / 3 - 1e-9
    # after the claims, nobody is preempted again
    assert all(e["time"] <= bound for e in stats["events"])


def test_youngest_first_throws_away_less_work_than_oldest_first() -> None:
    spec = load_spec(EXAMPLES / "lecture-morning-preemption.yaml")
    young = simulate(spec)[0].summary()["preemption"]
    assert spec.master.preemption is not None
    spec.master.preemption.victims = "oldest"
    old = simulate(spec)[0].summary()["preemption"]
    assert young["tasks_preempted"] > 0
    assert old["tasks_preempted"] > 0
    assert young["work_lost_seconds"] < old["work_lost_seconds"]


@pytest.mark.parametrize(
    "tasks",
    [
        [{"cpus": 1, "mem": 1024}, {"cpus": 1, "mem": 1024}],  # equal demands
        [{"cpus": 2, "mem": 1024}, {"cpus": 1, "mem": 2048}, {"cpus": 1, "mem": 1024}],
    ],
)
def test_frameworks_at_their_fair_shares_see_no_preemption_in_five_minutes(
    tasks: list[dict[str, float]],
) -> None:
    spec = Spec.model_validate(
        {
            "name": "steady",
            "cluster": {"slaves": [{"count": 6, "resources": {"cpus": 8, "mem": 16384}}]},
            "master": {
                "policy": "drf",
                "allocation_interval": 1,
                "refuse_seconds": 1,
                "preemption": {"timeout": 5, "notice": 1},
            },
            "frameworks": [
                {"name": f"F{i}", "task": task, "duration": {"uniform": [5, 40]}}
                for i, task in enumerate(tasks)
            ],
            "run": {"duration": 300, "seed": 3, "sample_interval": 1},
        }
    )
    results = simulate(spec)[0]
    assert results.summary()["preemption"]["tasks_preempted"] == 0
    assert sum(s.running_tasks for s in results.samples if s.time == 299) > 0


def guarantee_spec(headroom: str) -> Spec:
    return Spec.model_validate(
        {
            "name": "guarantee",
            "cluster": {"slaves": [{"count": 4, "resources": {"cpus": 16, "mem": 65536}}]},
            "master": {
                "policy": "drf",
                "allocation_interval": 1,
                "refuse_seconds": 1,
                "quota": {"prod": {"guarantee": {"cpus": 16}}},
                "quota_headroom": headroom,
                "preemption": {"guarantee_timeout": 10, "notice": 2},
            },
            "frameworks": [
                {"name": "batch", "role": "batch", "task": {"cpus": 1, "mem": 1024},
                 "duration": {"fixed": 3600}, "tasks_per_offer": "fill"},
                {"name": "prod", "role": "prod", "task": {"cpus": 2, "mem": 1024},
                 "duration": {"fixed": 3600}, "tasks_per_offer": "fill", "start": 100},
            ],
            "run": {"duration": 200, "seed": 1, "sample_interval": 1},
        }
    )  # fmt: skip


def test_a_role_below_its_guarantee_gets_it_back_after_the_guarantee_timeout() -> None:
    """Quota's stricter case with `demand` headroom: prod is guaranteed 16 CPUs; batch
    took the cluster first, as nothing is held for a role that wants nothing. Fair-share
    preemption is off (no timeout); the guarantee alone brings prod to 16."""
    results = simulate(guarantee_spec("demand"))[0]
    prod = {s.time: s.allocated.get("cpus", 0.0) for s in results.samples if s.framework == "prod"}
    assert prod[110.0] == 0  # waiting out the guarantee timeout
    assert prod[114.0] >= 16  # 10 s + notice + a round: its guarantee, and no more taken
    assert prod[199.0] == prod[114.0]
    assert results.summary()["preemption"]["tasks_preempted"] == 16


def test_a_guarantee_held_for_an_absent_role_is_there_when_it_comes() -> None:
    """The same with Mesos's headroom (the default): prod's 16 CPUs stay idle until it
    comes, then are its at once, and nobody is preempted."""
    results = simulate(guarantee_spec("all"))[0]
    samples = results.samples
    batch = {s.time: s.allocated.get("cpus", 0.0) for s in samples if s.framework == "batch"}
    prod = {s.time: s.allocated.get("cpus", 0.0) for s in samples if s.framework == "prod"}
    assert batch[99.0] == 48  # 64 less prod's guarantee
    assert prod[102.0] == 16
    assert results.summary()["preemption"]["tasks_preempted"] == 0
