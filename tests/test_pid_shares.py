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


def test_a_principals_tasks_together_are_held_to_their_shares_summed() -> None:
    shares = PidShares(1500, Resources(cpus=4, mem=8192))
    tiny = shares.share(Resources(cpus=0.01, mem=24))  # (review 62's: 24 MB of 8 GB)
    assert shares.of(Resources(cpus=0.01, mem=24)) == LEAST  # each at the floor ...
    assert shares.of_principal(72 * tiny) == 118  # ... 72 of them 118, not 1,152
    assert shares.of_principal(tiny) == LEAST  # (a group is never below one of its tasks)
    assert shares.of_principal(5.0) == 1125  # (2 at the most: all the slave's cpus and mem)
    assert PidShares(1500, SLAVE, fixed=8).of_principal(0.5) is None  # (the operator's sum)


principals = st.lists(
    st.tuples(st.integers(0, 3), st.floats(0.001, 4), st.floats(1, 2048)), min_size=1, max_size=60
)


@given(principals)
def test_a_principal_can_always_have_its_share_of_the_budget_whatever_the_others_run(
    tasks: list[tuple[int, float, float]],
) -> None:
    """Tasks that fit the slave, of up to four principals, any shapes (tiny ones many):
    what the slave's parent holds (3/4 of the host), less what the other principals'
    groups may take, leaves each principal its shares' worth of the budget, less LEAST
    for each other principal below its floor."""
    shares = PidShares(32_768, SLAVE)
    held: dict[int, float] = {}
    cpus = mem = 0.0
    for who, c, m in tasks:
        if cpus + c <= 4 and mem + m <= 2048:
            r = Resources(cpus=c, mem=m)
            held[who] = held.get(who, 0.0) + shares.share(r)
            cpus, mem = cpus + c, mem + m
    together = shares.together()
    assert together is not None
    bounds = {who: shares.of_principal(s) or 0 for who, s in held.items()}
    for who, share in held.items():
        others = sum(b for w, b in bounds.items() if w != who)
        floors = LEAST * (len(held) - 1)
        assert together - others >= int(32_768 * 3 / 8 * share) - floors
