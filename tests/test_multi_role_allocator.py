"""Multi-role frameworks in the allocator (Mesos's MULTI_ROLE): a framework is a client in
each of its roles; every offer is one role's; suppress, revive and decline filters are a
role's; fair share and quota count what each role holds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from master.allocation.allocator import Allocator, AllocatorError
from master.allocation.quota import Quota
from protocol.wire.reservations import role_of
from protocol.wire.resources import Resources

WHOLE = Resources(cpus=4, mem=4096)


def test_each_offer_is_one_role_and_names_it() -> None:
    a = Allocator()
    a.add_framework("fw", roles=["web", "batch"])
    a.add_slave("s1", WHOLE)
    a.add_slave("s2", WHOLE)
    offers = a.allocate(0.0)
    assert {(o.framework_id, o.role) for o in offers} == {("fw", "web"), ("fw", "batch")}
    assert a.allocation("fw") == WHOLE + WHOLE
    assert a.allocation("fw", "web") == WHOLE
    assert a.held("fw", "s1", offers[0].role) == WHOLE


def test_a_role_is_ordered_among_its_roles_frameworks() -> None:
    # fw holds one slave as web and one as batch; tenant (batch alone) holds nothing:
    # of two more slaves, one goes to each role, and in batch to tenant (lowest there)
    a = Allocator()
    a.add_framework("fw", roles=["web", "batch"])
    a.add_slave("s1", WHOLE)
    a.add_slave("s2", WHOLE)
    a.allocate(0.0)
    a.add_framework("tenant", "batch")
    a.add_slave("s3", WHOLE)
    a.add_slave("s4", WHOLE)
    got = {(o.framework_id, o.role) for o in a.allocate(1.0)}
    assert got == {("tenant", None), ("fw", "web")}
    assert a.roles.share("batch") == pytest.approx(a.roles.share("web"))


def test_per_role_suppress_and_revive() -> None:
    a = Allocator()
    a.add_framework("fw", roles=["web", "batch"])
    a.suppress("fw", ["web"])
    assert a.suppressed("fw", "web")
    assert not a.suppressed("fw", "batch")
    assert not a.suppressed("fw")  # (not in every role)
    a.add_slave("s1", WHOLE)
    assert [o.role for o in a.allocate(0.0)] == ["batch"]
    a.suppress("fw")  # no roles: every role
    assert a.suppressed("fw")
    a.recover("fw", "s1", WHOLE, role="batch")
    assert a.allocate(1.0) == []
    a.revive("fw", ["web"])
    assert [o.role for o in a.allocate(2.0)] == ["web"]


def test_a_role_it_is_not_in_is_refused() -> None:
    a = Allocator()
    a.add_framework("fw", roles=["web", "batch"])
    a.add_slave("s1", WHOLE)
    a.allocate(0.0)
    with pytest.raises(AllocatorError, match="not in role ops"):
        a.suppress("fw", ["ops"])
    with pytest.raises(AllocatorError, match="not in role ops"):
        a.recover("fw", "s1", WHOLE, role="ops")
    with pytest.raises(AllocatorError, match="several roles"):
        a.recover("fw", "s1", WHOLE)
    with pytest.raises(AllocatorError, match="must not contain"):
        a.add_framework("a/b", roles=["web"])


def test_quota_counts_what_each_role_holds() -> None:
    a = Allocator()
    a.roles.set_quota("web", Quota(Resources(), limit=Resources(cpus=4, mem=4096)))
    a.add_framework("fw", roles=["web", "batch"])
    for i in range(3):
        a.add_slave(f"s{i}", WHOLE)
    offers = a.allocate(0.0)
    by_role: dict[str | None, Resources] = {}
    for o in offers:
        by_role[o.role] = by_role.get(o.role, Resources()) + o.resources
    assert by_role["web"] == WHOLE  # at its limit
    assert by_role["batch"] == WHOLE + WHOLE
    assert a.roles.held("web") == WHOLE.millis


def test_removing_a_multi_role_framework_frees_every_role() -> None:
    a = Allocator()
    a.add_framework("fw", roles=["web", "batch"])
    a.add_slave("s1", WHOLE)
    a.add_slave("s2", WHOLE)
    a.allocate(0.0)
    a.remove_framework("fw")
    assert a.allocated_total() == Resources()
    a.add_framework("fw", roles=["web"])  # (its id is free again)


ROLES = ["web", "batch", "ops"]
OPS = st.lists(
    st.tuples(
        st.sampled_from(["round", "release", "decline", "suppress", "revive", "slave+", "roles"]),
        st.integers(0, 3),
        st.lists(st.sampled_from(ROLES), max_size=2, unique=True),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_multi_role_invariants(ops: list[tuple[str, int, list[str]]]) -> None:
    """Nothing is allocated twice across a framework's roles (each slave's holders sum to
    at most its total), each offer is of one of the framework's roles (as they are now:
    its roles change, and one it holds something in may not go), resources reserved for
    a role are offered in that role alone, and a role suppressed is offered nothing."""
    a = Allocator()
    a.add_framework("multi", roles=ROLES)
    a.add_framework("single", "web")
    a.add_slave("s0", WHOLE)
    a.add_slave("r-web", Resources.parse("cpus(web):2;mem(web):512;cpus:1;mem:512"))
    a.add_slave("r-batch", Resources.parse("cpus(batch):1;mem(batch):256;cpus:1"))
    outstanding: list[tuple[str, str, Resources, str | None]] = []
    suppressed: set[str] = set()
    current = list(ROLES)  # (the framework's roles now)
    now = 0.0
    for op, n, roles in ops:
        now += 1.0
        if op == "round":
            for o in a.allocate(now):
                if o.framework_id == "multi":
                    assert o.role in current
                    assert o.role not in suppressed
                else:
                    assert o.role is None
                offered_in = o.role or "web"  # (single is in web)
                # reserved resources go to their role's client alone
                reserved = {role_of(k) for k in o.resources.millis} - {None}
                assert reserved <= {offered_in}, (o, reserved)
                outstanding.append((o.framework_id, o.slave_id, o.resources, o.role))
        elif op in ("release", "decline") and outstanding:
            fid, sid, res, role = outstanding.pop(n % len(outstanding))
            refuse = 5.0 if op == "decline" else None
            a.recover(fid, sid, res, role=role, refuse_seconds=refuse, now=now)
        elif op == "suppress" and set(roles) <= set(current):
            a.suppress("multi", roles)
            suppressed.update(roles or current)
        elif op == "revive" and set(roles) <= set(current):
            a.revive("multi", roles)
            suppressed.difference_update(roles or current)
        elif op == "roles" and roles:
            holding = [r for r in current if r not in roles and a.allocation("multi", r)]
            if holding:
                with pytest.raises(AllocatorError, match=f"in role {holding[0]}"):
                    a.set_roles("multi", roles)
            else:
                a.set_roles("multi", roles)
                suppressed.intersection_update(roles)  # (a new role comes unsuppressed)
                current = list(roles)
            assert a.clients.roles("multi") == current
        elif op == "slave+":
            a.add_slave(f"s{len(a.slaves)}", Resources(cpus=n + 1, mem=1024))
        for sid, slave in a.slaves.items():
            held = a.held("multi", sid) + a.held("single", sid)
            assert all(v <= slave.total.millis.get(k, 0) for k, v in held.millis.items())
        per_role = sum((a.allocation("multi", r) for r in current), Resources())
        assert per_role == a.allocation("multi")
        assert a.allocated_total() == sum((o[2] for o in outstanding), Resources())
