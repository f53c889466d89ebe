"""Each task's bound of processes is its dominant share of the slave, of 3/8 of the host's
pids: what a slave's tasks hold together stays under 3/4 of the host's, however a tenant
shapes its tasks; an operator's fixed bound, or none, replaces it."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from protocol.wire.resources import Resources
from slave.pid_shares import LEAST, PidShares, host_pids

SLAVE = Resources(cpus=4, mem=2048)


def test_a_task_has_its_dominant_share_of_the_budget() -> None:
    shares = PidShares(32_768, SLAVE)
    assert shares.of(Resources(cpus=1, mem=1024)) == 32_768 * 3 // 8 // 2  # mem's half
    assert shares.of(Resources(cpus=4, mem=64)) == 32_768 * 3 // 8  # the whole of cpus
    assert shares.of(Resources(cpus=0.01)) == 30  # (0.25% of 12,288)
    assert shares.of(Resources(cpus=0.001)) == LEAST
    assert shares.of(Resources(cpus=0.5, mem=256, disk=99_999)) == 32_768 * 3 // 8 // 8


def test_the_operators_bound_replaces_the_share() -> None:
    assert PidShares(32_768, SLAVE, fixed=256).of(Resources(cpus=4, mem=2048)) == 256
    none = PidShares(32_768, SLAVE, fixed=0)
    assert not none.bounded
    assert none.of(Resources(cpus=4)) is None


tasks = st.lists(st.tuples(st.floats(0.1, 4), st.floats(32, 2048)), min_size=1, max_size=40)


@given(tasks)
def test_tasks_that_fit_the_slave_together_hold_at_most_three_quarters_of_the_host(
    shapes: list[tuple[float, float]],
) -> None:
    fitting, cpus, mem = [], 0.0, 0.0  # (what the slave runs at once: within its total)
    for c, m in shapes:
        if cpus + c <= 4 and mem + m <= 2048:
            fitting.append(Resources(cpus=c, mem=m))
            cpus, mem = cpus + c, mem + m
    shares = PidShares(32_768, SLAVE)
    held = sum(shares.of(r) or 0 for r in fitting)
    assert held <= 32_768 * 3 / 4 + LEAST * len(fitting)


def test_the_host_has_the_fewer_of_its_pids_and_threads(tmp_path: Path) -> None:
    (tmp_path / "pid_max").write_text("4194304\n")
    (tmp_path / "threads-max").write_text("192735\n")
    assert host_pids(tmp_path) == 192_735


def test_the_slaves_tasks_together_are_held_to_three_quarters_of_the_host() -> None:
    assert PidShares(32_768, SLAVE).together() == 24_576
    assert PidShares(32_768, SLAVE, fixed=256).together() is None  # (the operator's sum)
