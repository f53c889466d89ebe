"""Quota on the real allocator: limits are never exceeded, guarantees are served first and
held back from others, and a guarantee the cluster cannot meet is reported, not fatal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_hdrf_property import fill

from master.allocator import Allocator
from master.quota import Quota, QuotaError
from protocol.resources import Resources

SLAVE = Resources(cpus=8, mem=8192)
CPU_TASK = Resources(cpus=1, mem=256)


def cluster(
    policy: str, slaves: int, roles: dict[str, str]
) -> tuple[Allocator, dict[str, Resources]]:
    allocator = Allocator(policy, seed=1)
    for framework, role in roles.items():
        allocator.add_framework(framework, role)
    for i in range(slaves):
        allocator.add_slave(f"s{i}", SLAVE)
    return allocator, dict.fromkeys(roles, CPU_TASK)


@pytest.mark.parametrize("policy", ["hdrf", "drf"])
def test_a_limit_caps_a_role_and_the_rest_goes_to_others(policy: str) -> None:
    allocator, tasks = cluster(policy, 2, {"greedy": "a", "other": "b"})
    allocator.set_quota("a", Quota(Resources(), limit=Resources(cpus=3)))
    running = fill(allocator, tasks)
    assert running["greedy"] == 3
    assert running["other"] == 13  # all the rest
    assert allocator.held_by_role("a")["cpus"] == 3000


def test_a_limit_on_a_pool_caps_its_whole_subtree() -> None:
    allocator, tasks = cluster("hdrf", 2, {"x": "eng/a", "y": "eng/b", "z": "ops"})
    allocator.set_quota("eng", Quota(Resources(), limit=Resources(cpus=5)))
    running = fill(allocator, tasks)
    assert running["x"] + running["y"] == 5
    assert running["z"] == 11


def test_a_guarantee_is_held_back_from_a_role_that_came_first() -> None:
    allocator, tasks = cluster("hdrf", 2, {"early": "batch", "late": "prod"})
    allocator.set_role_weight("batch", 7)  # prod's fair share alone: 2 CPUs of 16
    allocator.deactivate("late")  # not here yet: no demand, nothing held back
    allocator.set_quota("prod", Quota(Resources(cpus=6)))
    running = fill(allocator, tasks)
    assert running["early"] == 16  # work-conserving while prod wants nothing
    # prod arrives while batch holds everything; as batch's tasks end, prod is served
    # first and batch cannot take back what prod's guarantee still needs
    allocator.activate("late")
    for slave in ("s0",):
        held = allocator.held("early", slave)
        allocator.recover("early", slave, held)  # batch's tasks on s0 end
    running = fill(allocator, {"early": CPU_TASK, "late": CPU_TASK})
    assert running["late"] == 6  # its guarantee, though its weight alone would give it 2
    assert allocator.unsatisfiable() == {}


def test_a_guarantee_over_the_cluster_is_reported_and_stops_nothing() -> None:
    allocator, tasks = cluster("hdrf", 1, {"big": "big", "small": "small"})
    allocator.set_quota("big", Quota(Resources(cpus=100)))
    assert allocator.unsatisfiable() == {"big": "guarantees more cpus than the cluster has"}
    running = fill(allocator, tasks)
    assert running["big"] == 8  # it gets all there is; nothing breaks


def test_a_guarantee_over_its_limit_is_refused() -> None:
    with pytest.raises(QuotaError, match="over the limit"):
        Quota(Resources(cpus=4), limit=Resources(cpus=2))


SEG = st.sampled_from(["a", "b"])
ROLES = st.lists(st.lists(SEG, min_size=1, max_size=2).map("/".join), min_size=2, max_size=4)


@settings(max_examples=300, deadline=None)
@given(
    roles=ROLES,
    limits=st.dictionaries(st.lists(SEG, min_size=1, max_size=2).map("/".join),
                           st.integers(1, 24), max_size=3),
    guarantees=st.dictionaries(st.lists(SEG, min_size=1, max_size=2).map("/".join),
                               st.integers(1, 12), max_size=2),
    slaves=st.integers(2, 4),
)  # fmt: skip
def test_limits_hold_and_satisfiable_guarantees_are_met(
    roles: list[str], limits: dict[str, int], guarantees: dict[str, int], slaves: int
) -> None:
    roles = sorted(set(roles))
    allocator = Allocator("hdrf", seed=1)
    for i, role in enumerate(roles):
        allocator.add_framework(f"f{i}", role)
    for i in range(slaves):
        allocator.add_slave(f"s{i}", SLAVE)
    for role in set(limits) | set(guarantees):
        g = guarantees.get(role, 0)
        lim = limits.get(role)
        if lim is not None and g > lim:
            g = lim
        allocator.set_quota(role, Quota(Resources(cpus=g), Resources(cpus=lim) if lim else None))
    fill(allocator, {f"f{i}": CPU_TASK for i in range(len(roles))})
    for role, quota in allocator.quotas.items():
        held = allocator.held_by_role(role).get("cpus", 0) / 1000
        if quota.limit is not None:
            assert held <= quota.limit["cpus"], (role, held, quota)
    # guarantees that fit together (nested ones counted once, at the top) are met
    guaranteed = [r for r, q in allocator.quotas.items() if q.guarantee]
    tops = [r for r in guaranteed if not any(r.startswith(o + "/") for o in guaranteed)]
    needed = sum(allocator.quotas[r].guarantee.get("cpus", 0) for r in tops)
    if needed <= slaves * 8:
        for role, quota in allocator.quotas.items():
            demand = any(r == role or r.startswith(role + "/") for r in roles)
            want = min(quota.guarantee.get("cpus", 0), quota.limit["cpus"] if quota.limit else 1e9)
            # a limit on the same path (above it, or on everything below it) may cap it
            related = [
                a
                for a in allocator.quotas
                if allocator.quotas[a].limit
                and (role == a or role.startswith(a + "/") or a.startswith(role + "/"))
            ]
            if demand and not related:
                held = allocator.held_by_role(role).get("cpus", 0) / 1000
                assert held >= want, (role, held, quota)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("roles:\n  eng: {weight: 1}\n  eng: {weight: 2}\n", "'eng' is given twice"),
        ("roles:\n  eng: {weight: -1}\n", "roles.eng.weight"),
        ("roles:\n  eng: {quota: {guarantee: {cpus: 5}, limit: {cpus: 2}}}\n", "over the limit"),
        ("roles:\n  eng: {ordering: best}\n", "roles.eng.ordering"),
        ("roles:\n  'eng/*': {}\n", "eng/*"),
        ("roles:\n  eng: {wieght: 2}\n", "roles.eng.wieght"),
    ],
)
def test_a_bad_roles_file_stops_the_master_before_it_starts(
    tmp_path: Path, text: str, named: str
) -> None:
    path = tmp_path / "roles.yaml"
    path.write_text(text)
    master = subprocess.run(
        [sys.executable, "-m", "cluster", "master", "--roles", str(path), "--broker",
         "mqtt://127.0.0.1:1"], capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert master.returncode != 0
    assert named in master.stderr
    check = subprocess.run(
        [sys.executable, "-m", "cluster", "roles", "check", str(path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert check.returncode != 0
    assert named in check.stderr
