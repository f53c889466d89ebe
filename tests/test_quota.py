"""Quota on the real allocator: limits are never exceeded (a zero limit freezes a role),
guarantees are served first, unconditionally, and held back from others (every quota
role's, as in Mesos; with `demand` headroom only those of roles that want offers), and a
guarantee the cluster cannot meet is reported, not fatal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.cli import main
from cluster.local import operator_cli
from master.allocation.allocator import Allocator, AllocatorError
from master.allocation.quota import Quota, QuotaError, nesting_problem
from master.ha.registry import QuotaRecord
from master.roles_file import parse_roles
from protocol.wire.codec import decode, encode
from protocol.wire.messages import SetQuota, Wire
from protocol.wire.resources import Limit, Resources

from harness.allocation import fill

SLAVE = Resources(cpus=8, mem=8192)
CPU_TASK = Resources(cpus=1, mem=256)


def cluster(
    policy: str, slaves: int, roles: dict[str, str]
) -> tuple[Allocator, dict[str, Resources]]:
    allocator = Allocator(policy)
    for framework, role in roles.items():
        allocator.add_framework(framework, role)
    for i in range(slaves):
        allocator.add_slave(f"s{i}", SLAVE)
    return allocator, dict.fromkeys(roles, CPU_TASK)


@pytest.mark.parametrize("policy", ["hdrf", "drf"])
def test_a_limit_caps_a_role_and_the_rest_goes_to_others(policy: str) -> None:
    allocator, tasks = cluster(policy, 2, {"greedy": "a", "other": "b"})
    allocator.roles.set_quota("a", Quota(Resources(), limit=Resources(cpus=3)))
    running = fill(allocator, tasks)
    assert running["greedy"] == 3
    assert running["other"] == 13  # all the rest
    assert allocator.roles.held("a")["cpus"] == 3000


def test_a_limit_on_a_pool_caps_its_whole_subtree() -> None:
    allocator, tasks = cluster("hdrf", 2, {"x": "eng/a", "y": "eng/b", "z": "ops"})
    allocator.roles.set_quota("eng", Quota(Resources(), limit=Resources(cpus=5)))
    running = fill(allocator, tasks)
    assert running["x"] + running["y"] == 5
    assert running["z"] == 11


def test_a_guarantee_is_held_for_a_role_with_no_framework_yet() -> None:
    # Mesos's default (`--quota-headroom all`): every quota role's unmet guarantee is
    # set aside, framework or not, so it is there the moment its framework arrives
    allocator, tasks = cluster("hdrf", 2, {"early": "batch", "late": "prod"})
    allocator.roles.set_weight("batch", 7)  # prod's fair share alone: 2 CPUs of 16
    allocator.deactivate("late")  # not here yet
    allocator.roles.set_quota("prod", Quota(Resources(cpus=6)))
    running = fill(allocator, tasks)
    assert running["early"] == 10  # 6 CPUs stay idle for prod
    allocator.activate("late")
    running = fill(allocator, {"early": CPU_TASK, "late": CPU_TASK})
    assert running["late"] == 6  # at once: nothing had to end first
    assert running["early"] == 0


def test_demand_headroom_is_work_conserving_and_holds_back_once_the_role_comes() -> None:
    # `--quota-headroom demand`: nothing is held for a role without demand (no idle
    # resources); once it comes, it is served first as tasks end, or by preemption
    allocator = Allocator("hdrf", quota_headroom="demand")
    allocator.add_framework("early", "batch")
    allocator.add_framework("late", "prod")
    for i in range(2):
        allocator.add_slave(f"s{i}", SLAVE)
    allocator.roles.set_weight("batch", 7)  # prod's fair share alone: 2 CPUs of 16
    allocator.deactivate("late")  # not here yet: no demand, nothing held back
    allocator.roles.set_quota("prod", Quota(Resources(cpus=6)))
    running = fill(allocator, {"early": CPU_TASK, "late": CPU_TASK})
    assert running["early"] == 16  # work-conserving while prod wants nothing
    # prod arrives while batch holds everything; as batch's tasks end, prod is served
    # first and batch cannot take back what prod's guarantee still needs
    allocator.activate("late")
    held = allocator.held("early", "s0")
    allocator.recover("early", "s0", held)  # batch's tasks on s0 end
    running = fill(allocator, {"early": CPU_TASK, "late": CPU_TASK})
    # its guarantee, though its weight alone would give it 2, and in the same offer the
    # rest of the slave freed (Mesos 1.9 bursts a role past its guarantee, to its limit)
    assert running["late"] == 8
    assert allocator.roles.unsatisfiable() == {}


@pytest.mark.parametrize("headroom", ["all", "demand"])
def test_a_guarantee_is_not_cut_by_other_roles_headroom(headroom: str) -> None:
    # two quota roles; `picky`'s framework declines the slave, `q` is below its
    # guarantee: q is offered up to its guarantee whatever is held back for picky
    allocator = Allocator("drf", quota_headroom=headroom)
    allocator.add_slave("s0", Resources(cpus=3, mem=3072))
    allocator.add_framework("picky", "p")
    allocator.add_framework("f", "q")
    allocator.roles.set_quota("p", Quota(Resources(cpus=2, mem=2048)))
    allocator.roles.set_quota("q", Quota(Resources(cpus=2, mem=2048)))
    got: dict[str, Resources] = {}
    for now in range(5):
        for a in allocator.allocate(float(now)):
            if a.framework_id == "picky":
                allocator.recover(a.framework_id, a.slave_id, a.resources,
                                  refuse_seconds=1e9, now=float(now))  # fmt: skip
            else:
                got[a.framework_id] = got.get(a.framework_id, Resources()) + a.resources
    assert got["f"] == Resources(cpus=2, mem=2048)


@pytest.mark.parametrize("policy", ["drf", "hdrf", "naive-hdrf"])
@pytest.mark.parametrize("how", ["cpus:0", "cpus:0;mem:0"])
def test_a_zero_limit_freezes_a_role(policy: str, how: str) -> None:
    allocator, tasks = cluster(policy, 2, {"frozen": "a", "other": "b"})
    allocator.roles.set_quota("a", Quota(Resources(), limit=Limit.parse(how)))
    running = fill(allocator, tasks)
    assert running["frozen"] == 0
    assert allocator.roles.held("a") == {}
    assert running["other"] == 16


def test_a_zero_limit_leaves_running_tasks_running_and_offers_nothing_back() -> None:
    # as in Mesos: lowering a limit kills nothing; what ends is not offered back
    allocator, tasks = cluster("drf", 1, {"f": "a"})
    assert fill(allocator, tasks) == {"f": 8}
    allocator.roles.set_quota("a", Quota(Resources(), limit=Limit(cpus=0)))
    assert allocator.roles.held("a") == {"cpus": 8000, "mem": 8 * 256 * 1000}
    allocator.recover("f", "s0", CPU_TASK)  # one task ends
    assert allocator.allocate(100.0, full=True) == []
    assert allocator.held("f", "s0") == Resources(cpus=7, mem=7 * 256)


def test_a_guarantee_over_the_cluster_is_reported_and_stops_nothing() -> None:
    allocator, tasks = cluster("hdrf", 1, {"big": "big", "small": "small"})
    allocator.roles.set_quota("big", Quota(Resources(cpus=100)))
    assert allocator.roles.unsatisfiable() == {"big": "guarantees more cpus than the cluster has"}
    running = fill(allocator, tasks)
    assert running["big"] == 8  # it gets all there is; nothing breaks


def test_sub_roles_guarantees_that_exceed_their_parents_are_refused() -> None:
    """As in Mesos, a role's guarantee includes its sub-roles': an operator's call or a
    roles file that guarantees more below a role than the role itself is refused, and
    nothing changes. Roles side by side (drf) do not nest."""
    allocator = Allocator("hdrf")
    allocator.roles.set_quota("eng", Quota(Resources(cpus=8, mem=1024)))
    allocator.roles.set_quota("eng/a", Quota(Resources(cpus=4)))
    allocator.roles.set_quota("eng/b/x", Quota(Resources(cpus=4)))  # nearest below eng, too
    with pytest.raises(AllocatorError, match=r"eng/a, eng/b/x \(cpus:9 in all\) exceed"):
        allocator.roles.set_quota("eng/b/x", Quota(Resources(cpus=5)))
    with pytest.raises(AllocatorError, match="mem"):
        allocator.roles.set_quota("eng/a", Quota(Resources(cpus=4, mem=2048)))
    with pytest.raises(AllocatorError, match="eng's"):  # nor by lowering the parent
        allocator.roles.set_quota("eng", Quota(Resources(cpus=7)))
    assert allocator.roles.quota_problem("eng", None) is None  # (cleared: nothing to include)
    assert allocator.quotas["eng/b/x"].guarantee == Resources(cpus=4)
    # a roles file is taken as a whole: its order does not matter, its sum does
    file = parse_roles(
        "roles:\n  eng/a: {quota: {guarantee: {cpus: 6}}}\n"
        "  eng: {quota: {guarantee: {cpus: 10}}}\n"
    )
    allocator.roles.apply(file.roles)
    assert allocator.quotas["eng"].guarantee == Resources(cpus=10)
    too_much = parse_roles("roles:\n  eng/a: {quota: {guarantee: {cpus: 7}}}\n")
    with pytest.raises(AllocatorError, match="cpus:11 in all"):  # with eng/b/x's 4
        allocator.roles.apply(too_much.roles)
    assert allocator.quotas["eng/a"].guarantee == Resources(cpus=6)
    flat = Allocator("drf")
    flat.roles.set_quota("eng", Quota(Resources(cpus=1)))
    flat.roles.set_quota("eng/a", Quota(Resources(cpus=9)))


def test_a_guarantee_over_its_limit_is_refused() -> None:
    with pytest.raises(QuotaError, match="over the limit"):
        Quota(Resources(cpus=4), limit=Resources(cpus=2))


def test_a_nested_guarantee_is_met_before_its_parents_own_frameworks_are_served() -> None:
    """`a` and `a/a` both guaranteed 9 cpus, two slaves of 8: the child's guarantee counts
    towards its parent's, not the other way round, so the second slave goes to `a/a`
    (both are then met), not to a framework of `a` itself (which left `a/a` with 8)."""
    allocator, demand = cluster("hdrf", 2, {"f0": "a", "f1": "a/a"})
    allocator.roles.set_quota("a", Quota(Resources(cpus=9)))
    allocator.roles.set_quota("a/a", Quota(Resources(cpus=9)))
    fill(allocator, demand)
    assert allocator.roles.held("a/a")["cpus"] >= 9000


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
    allocator = Allocator("hdrf")
    for i, role in enumerate(roles):
        allocator.add_framework(f"f{i}", role)
    for i in range(slaves):
        allocator.add_slave(f"s{i}", SLAVE)
    quotas = {}
    for role in set(limits) | set(guarantees):
        g = guarantees.get(role, 0)
        lim = limits.get(role)
        if lim is not None and g > lim:
            g = lim
        quotas[role] = Quota(Resources(cpus=g), Resources(cpus=lim) if lim else None)

    def set_all(order: list[str]) -> None:
        for role in order:
            allocator.roles.set_quota(role, quotas[role])

    if nesting_problem(quotas):  # refused, parents first or children first
        for order in (sorted(quotas), sorted(quotas, reverse=True)):
            with pytest.raises(AllocatorError, match="exceed their parent"):
                set_all(order)
            allocator.quotas.clear()
        return
    set_all(sorted(quotas))  # (parents first: each step nests)
    fill(allocator, {f"f{i}": CPU_TASK for i in range(len(roles))})
    for role, quota in allocator.quotas.items():
        held = allocator.roles.held(role).get("cpus", 0) / 1000
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
                held = allocator.roles.held(role).get("cpus", 0) / 1000
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
        (  # (Mesos refuses it too: a role's guarantee includes its sub-roles')
            "roles:\n  eng/a: {quota: {guarantee: {cpus: 5}}}\n"
            "  eng/b: {quota: {guarantee: {cpus: 4}}}\n  eng: {quota: {guarantee: {cpus: 8}}}\n",
            "exceed their parent eng's",
        ),
    ],
)
def test_a_bad_roles_file_stops_the_master_before_it_starts(
    tmp_path: Path, text: str, named: str
) -> None:
    """The `drfmesos` command in process (as click runs it); the test below runs one of
    these as real processes."""
    path = tmp_path / "roles.yaml"
    path.write_text(text)
    master = CliRunner().invoke(
        main, ["master", "--roles", str(path), "--broker", "mqtt://127.0.0.1:1"]
    )
    assert master.exit_code != 0
    assert named in master.stderr
    check = CliRunner().invoke(main, ["roles", "check", str(path)])
    assert check.exit_code != 0
    assert named in check.stderr


def test_a_bad_roles_file_stops_the_master_process(tmp_path: Path) -> None:
    path = tmp_path / "roles.yaml"
    path.write_text("roles:\n  eng: {weight: -1}\n")
    master = subprocess.run(
        [sys.executable, "-m", "cluster", "master", "--roles", str(path), "--broker",
         "mqtt://127.0.0.1:1"], capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert master.returncode != 0
    assert "roles.eng.weight" in master.stderr
    check = subprocess.run(
        [sys.executable, "-m", "cluster", "roles", "check", str(path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert check.returncode != 0
    assert "roles.eng.weight" in check.stderr


def test_a_zero_limit_stays_a_limit_from_every_door_to_the_allocator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`cpus: 0` is kept apart from "cpus not named" by the CLI, the roles file, the
    operator call on the wire and the registry alike."""
    zero = Limit(cpus=0)
    assert zero != Resources()
    assert zero
    assert str(zero) == "cpus:0"
    assert Limit.parse("cpus:0,mem:2") == Limit(cpus=0, mem=2)
    roles = parse_roles("roles:\n  a: {quota: {limit: {cpus: 0}}}\n")
    quota = roles.roles["a"].quota
    assert quota is not None
    assert quota.quota().limit == zero
    message = decode(encode(SetQuota(role="a", limit=zero))).message
    assert isinstance(message, SetQuota)
    assert message.limit == zero
    record = QuotaRecord.model_validate(QuotaRecord(limit=zero).model_dump(mode="json"))
    assert record.limit == zero
    # the CLI's --limit keeps the zero (the call itself is caught before the broker)
    sent: list[Wire] = []
    monkeypatch.setattr(operator_cli, "_call", lambda _b, _c, message, _d, _t: sent.append(message))
    result = CliRunner().invoke(operator_cli.quota_set, ["a", "--limit", "cpus:0"])
    assert result.exit_code == 0, result.output
    assert sent == [SetQuota(role="a", limit=zero)]


@pytest.mark.parametrize("policy", ["drf", "wdrf", "asset", "flat", "fifo", "ceei", "hdrf"])
def test_the_ideal_stops_a_pool_with_a_zero_limit_at_nothing(policy: str) -> None:
    from master.allocation.ideal import User, ideal

    users = [User("a", {"c": 1}, path=("eng", "x")), User("c", {"c": 1}, path=("ops",))]
    r = ideal(policy, {"c": 12, "m": 12}, users, quota_limits={("eng",): {"c": 0}})
    assert (r["a"].tasks, r["c"].tasks) == (0, 12)
