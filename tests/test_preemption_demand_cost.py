"""What a tenant's declared demand costs preemption's check, which the master runs on its
loop every allocation interval while preemption is on (master.preemptor: "claims need
them at once, and they stay on the loop"). A Request may declare 100 task shapes; a
claimant's check must not cost about 100 times what one shape costs, or one tenant
stalls every other call, heartbeat and round of the master for as long as it plans.

Measured on 2026-12-06 on the 2-core machine (load 7-10), the check of one claimant that
starves on a packed cluster: 100 slaves and 20 frameworks, 343 ms with one declared shape
and 33.9 s with 100; 400 slaves and 40 frameworks, 4.9 s and 443 s."""

from __future__ import annotations

import gc
import random
import time

import pytest

from master.allocation.fair_shares import Contender
from master.allocation.planning import Cluster, RunningTask
from master.allocation.preemption import Preemption, PreemptionConfig
from protocol.wire.resources import Resources

TASK = Resources(cpus=1, mem=1024).millis
SLAVES, FRAMEWORKS = 30, 10


def check_seconds(shapes: int) -> float:
    """One check of a packed cluster (each slave 8 one-CPU tasks of random frameworks,
    nothing free) where a claimant that holds nothing declares `shapes` task shapes, none
    of which fits anywhere free: the check plans its claim."""
    rng = random.Random(1)
    running: dict[str, list[RunningTask]] = {}
    held: dict[str, dict[str, int]] = {f"f{i}": {} for i in range(FRAMEWORKS)}
    for s in range(SLAVES):
        tasks = []
        for j in range(8):
            fw = f"f{rng.randrange(FRAMEWORKS)}"
            tasks.append(RunningTask(fw, f"t{s}-{j}", f"s{s}", dict(TASK), float(s * 8 + j)))
            for name, amount in TASK.items():
                held[fw][name] = held[fw].get(name, 0) + amount
        running[f"s{s}"] = tasks
    total = {"cpus": 8000 * SLAVES, "mem": 8192 * 1000 * SLAVES}
    declared = [
        (dict(Resources(cpus=0.5 + i / 1000, mem=512).millis), 10_000) for i in range(shapes)
    ]
    contenders = [Contender(f, f, 1.0, h, True, None, dict(TASK)) for f, h in held.items()]
    contenders.append(Contender("claimant", "claimant", 1.0, {}, True, declared))
    free = {f"s{s}": {"cpus": 0, "mem": 0} for s in range(SLAVES)}
    cluster = Cluster(total, free, {**held, "claimant": {}}, {}, running)
    preemption = Preemption(PreemptionConfig(timeout=0.0, notice=2.0))
    gc.collect()
    gc.disable()  # (the planning's own cost: a test process's heap is not the master's)
    try:
        began = time.perf_counter()
        claims = preemption.check(1.0, "drf", contenders, cluster, {})
        took = time.perf_counter() - began
    finally:
        gc.enable()
    assert claims, "the claimant starves: the check plans for it"
    return took


@pytest.mark.timing  # CPU time of the master's loop, compared
def test_a_hundred_declared_shapes_cost_preemptions_check_little_more_than_one() -> None:
    one = min(check_seconds(1) for _ in range(3))
    hundred = check_seconds(100)
    assert hundred < 10 * one, (
        f"the check took {hundred * 1000:.0f} ms for a claimant of 100 declared shapes, "
        f"{hundred / one:.0f}x the {one * 1000:.0f} ms of one shape, on the master's loop"
    )


@pytest.mark.timing  # CPU time of the master's loop, compared
def test_planning_a_claimants_share_grows_with_the_cluster_not_its_square(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A claimant's fair share on a packed cluster grows with the cluster, and so does the
    number of its plans: walking every slave for each plan made a check quadratic in the
    slaves (20 frameworks, 100 slaves 0.25 s, 400 slaves 2.9 s: x11.7, quiet machine,
    2026-12-06). Each slave's plan is kept between plans and made again only when it
    comes up: 19 ms and 60 ms, x3.1."""
    monkeypatch.setitem(globals(), "FRAMEWORKS", 20)
    timings = []
    for slaves in (100, 400):
        monkeypatch.setitem(globals(), "SLAVES", slaves)
        timings.append(min(check_seconds(1) for _ in range(2)))
    small, large = timings
    assert large < 6 * small, f"100 slaves {small * 1000:.0f} ms, 400 {large * 1000:.0f} ms"
