"""Reservations in the allocation policy: a role's reserved resources go to its frameworks
(and its sub-roles') alone, count as what they are in shares, and no sequence of rounds,
declines, reservations and unreservations offers anything twice."""

from __future__ import annotations

import asyncio
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from master.allocation.allocator import Allocator, AllocatorError
from master.allocation.quota import Quota
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.messages import Offer as WireOffer
from protocol.wire.reservations import conversion, offered_to, parse_key, role_of, stripped
from protocol.wire.resources import ResourceError, Resources
from protocol.wire.why_codes import WhyCode
from slave import volumes

from harness.cycle import Books, Offer

ROLES = ["a", "a/b", "a/b/c", "b", "c"]


def R(text: str) -> Resources:
    return Resources.parse(text)


def test_mesos_text_form_parses_to_identities() -> None:
    r = R("cpus(team-a):2;mem(team-a,alice):1024;cpus:1;mem(eng)(eng/web,bob,{k=v}):8")
    assert r["cpus(team-a)"] == 2
    assert r["cpus"] == 1
    assert role_of("mem(eng)(eng/web,bob,{k=v})") == "eng/web"
    stack = parse_key("mem(eng)(eng/web,bob,{k=v})").reservations
    assert [(x.type, x.role, x.principal, x.labels) for x in stack] == [
        ("STATIC", "eng", None, ()),
        ("DYNAMIC", "eng/web", "bob", (("k", "v"),)),
    ]
    assert stripped(r.millis) == {"cpus": 3000, "mem": 1032000}
    # one identity, however it is spelled
    assert Resources({"cpus( team-a , alice )": 1}) == Resources({"cpus(team-a,alice)": 1})


@pytest.mark.parametrize("bad", ["cpus(:1", "cpus(*):1", "cpus(a,b,c):1", "cpus(a)x:1", "(a):1"])
def test_a_malformed_reservation_is_refused(bad: str) -> None:
    with pytest.raises(ResourceError):
        R(bad)


def test_unknown_names_are_caught_under_a_reservation_too() -> None:
    with pytest.raises(ResourceError, match="did you mean cpus"):
        R("cpu(team-a):2").check_names()
    R("cpus(team-a):2;gpus(team-a,alice):1").check_names()


def test_a_reservation_counts_as_its_resource_in_shares() -> None:
    a = Allocator("drf")
    a.add_slave("s1", R("cpus(a):2;cpus:2;mem:100"))
    a.add_framework("f", "a")
    [offer] = a.allocate(0.0)
    assert offer.resources == R("cpus(a):2;cpus:2;mem:100")
    assert a.total == R("cpus:4;mem:100")
    assert a.allocation("f") == R("cpus:4;mem:100")
    assert a.dominant_share("f") == 1.0


def test_an_operator_reservation_is_offered_to_its_role_alone() -> None:
    a = Allocator("drf")
    a.add_slave("s1", R("cpus:4;mem:400"))
    a.add_framework("other", "b")
    a.suppress("other")
    a.update_available("s1", R("cpus:2;mem:200"), R("cpus(a,ops):2;mem(a,ops):200"))
    a.revive("other")
    [offer] = a.allocate(0.0)
    assert (offer.framework_id, offer.resources) == ("other", R("cpus:2;mem:200"))
    a.add_framework("mine", "a")
    [offer] = a.allocate(1.0)
    assert (offer.framework_id, offer.resources) == ("mine", R("cpus(a,ops):2;mem(a,ops):200"))
    # unreserved, it is anybody's again
    a.recover("mine", "s1", offer.resources)
    a.remove_framework("mine")
    a.update_available("s1", R("cpus(a,ops):2;mem(a,ops):200"), R("cpus:2;mem:200"))
    [offer] = a.allocate(2.0)
    assert (offer.framework_id, offer.resources) == ("other", R("cpus:2;mem:200"))


def test_an_operation_must_keep_to_what_is_there() -> None:
    a = Allocator("drf")
    a.add_slave("s1", R("cpus:4;mem:400"))
    with pytest.raises(AllocatorError, match="not"):
        a.update_available("s1", R("cpus:8"), R("cpus(a):8"))
    with pytest.raises(AllocatorError, match="same amounts"):
        a.update_available("s1", R("cpus:2"), R("cpus(a):3"))
    a.add_framework("f", "a")
    a.allocate(0.0)
    with pytest.raises(AllocatorError, match="does not hold"):
        a.update_allocation("f", "s1", R("cpus(a):1"), R("cpus:1"))
    assert a.slaves["s1"].total == R("cpus:4;mem:400")


def test_idle_reservations_are_no_other_roles_headroom() -> None:
    """Mesos's QuotaHeadroomWhenReservationsExceedQuota from the other side: a quota
    role's unmet guarantee is held back from the unreserved resources, not from others'
    reservations."""
    a = Allocator("drf")
    a.roles.set_quota("q", Quota(R("cpus:2")))
    a.add_slave("s1", R("cpus(b):2;cpus:2"))
    a.add_framework("fb", "b")
    [offer] = a.allocate(0.0)
    assert (offer.framework_id, offer.resources) == ("fb", R("cpus(b):2"))


# -- properties ----------------------------------------------------------------------------

SLAVE = st.lists(
    st.tuples(st.sampled_from(["", *ROLES]), st.integers(1, 4)), min_size=1, max_size=3
)
OPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["round", "release", "decline", "fw+", "fw-", "reserve", "unreserve", "slave-", "idle"]
        ),
        st.integers(0, 7),
    ),
    max_size=50,
)


def slave_total(parts: list[tuple[str, int]]) -> Resources:
    out = Resources()
    for role, cpus in parts:
        mark = f"({role})" if role else ""
        out = out + Resources({f"cpus{mark}": cpus, f"mem{mark}": 100 * cpus})
    return out


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["drf", "naive-hdrf", "hdrf"]), st.lists(SLAVE, min_size=1, max_size=4), OPS)
def test_reserved_resources_go_to_their_role_subtree_and_nothing_twice(
    policy: str, slaves: list[list[tuple[str, int]]], ops: list[tuple[str, int]]
) -> None:
    a = Allocator(policy)
    for n, parts in enumerate(slaves):
        a.add_slave(f"s{n}", slave_total(parts))
    held: list[tuple[str, str, Resources]] = []
    now = 0.0
    for op, i in ops:
        now += 1
        fid, sid = f"f{i}", f"s{i % len(slaves)}"
        if op == "fw+" and fid not in a.frameworks:
            a.add_framework(fid, ROLES[i % len(ROLES)])
        elif op == "fw-" and fid in a.frameworks:
            a.remove_framework(fid)
            held = [h for h in held if h[0] != fid]
        elif op == "slave-" and sid in a.slaves and len(a.slaves) > 1:
            a.remove_slave(sid)
            held = [h for h in held if h[1] != sid]
        elif op == "round":
            for offer in a.allocate(now):
                role = a.frameworks[offer.framework_id].role
                for key in offer.resources:
                    owner = role_of(key)
                    assert owner is None or offered_to(owner, role), (key, role)
                held.append((offer.framework_id, offer.slave_id, offer.resources))
        elif op in ("release", "decline") and held:
            f, s, r = held.pop(i % len(held))
            a.recover(f, s, r, refuse_seconds=3 if op == "decline" else None, now=now)
        elif op == "reserve" and sid in a.slaves and a.slaves[sid].unallocated.get("cpus"):
            a.update_available(sid, R("cpus:1"), R(f"cpus({ROLES[i % len(ROLES)]},p):1"))
        elif op == "unreserve" and sid in a.slaves:
            free = a.slaves[sid].unallocated
            mine = [k for k, v in free.items() if v >= 1000 and k.startswith("cpus(")]
            if mine:
                a.update_available(sid, R(f"{mine[0]}:1"), R("cpus:1"))
        elif op == "idle":  # (read: from here on it is kept, not counted afresh)
            assert a.idle_reserved() == idle_of(a)
        # nothing is allocated twice: what was handed out plus what is free is each
        # slave's total, identity by identity
        for s, book in a.slaves.items():
            out = sum((r for _, ss, r in held if ss == s), Resources())
            assert out + a.free(s) == book.total
            assert all(v >= 0 for v in book.unallocated.values())
        # shares see what the resources are, whoever's
        for f in a.frameworks:
            mine_all = sum((r for ff, _, r in held if ff == f), Resources())
            assert a.allocation(f) == Resources.from_millis(stripped(mine_all.millis))
        assert a.total == Resources.from_millis(
            stripped(sum((b.total for b in a.slaves.values()), Resources()).millis)
        )
    # what is reserved and idle, by role, as the quota stage reads it: the same whether
    # it was kept through the operations or counted at this first read
    assert a.idle_reserved() == idle_of(a)


def idle_of(a: Allocator) -> dict[str, dict[str, int]]:
    """Each role's reserved resources free on the slaves, by what they are."""
    out: dict[str, dict[str, int]] = {}
    for book in a.slaves.values():
        for key, amount in book.unallocated.items():
            role = book.reserved.get(key)
            if role and amount:
                mine = out.setdefault(role, {})
                base = parse_key(key).base
                mine[base] = mine.get(base, 0) + amount
    return out


def test_why_says_what_is_free_is_reserved_for_other_roles() -> None:
    """`drfmesos why`: a framework offered nothing because what is free is another role's
    reservation hears so, with the amounts; the roles named to an operator only."""
    allocator, books = Allocator("drf"), Books()
    for name, role in {"mine": "team-a", "other": "team-b"}.items():
        allocator.add_framework(name, role)
        books.roles[name] = role
    allocator.add_slave("s0", R("cpus(team-a):2;mem(team-a):1024;cpus:1;mem:512"))
    cycle = OfferCycle(allocator, books, CycleConfig())
    allocator.suppress("mine")
    for i, a in enumerate(cycle.round(0.0).offers):  # other takes the unreserved part
        books.offers[f"o{i}"] = Offer(f"o{i}", a.framework_id, a.slave_id, a.resources, 0.0)
        assert a.resources == R("cpus:1;mem:512")
    books.offers.clear()  # (launched: its tasks hold it)
    reasons, _ = cycle.why("other", 1.0)
    assert reasons[0].code == WhyCode.RESERVED_FOR_OTHERS
    assert reasons[0].numbers["for"] == ["team-a"]
    assert reasons[0].numbers["reserved"] == {"cpus": 2.0, "mem": 1024.0}
    told, _ = cycle.why("other", 1.0, others_named=False)
    assert told[0].numbers["for"] == 1.0
    assert "team-a" not in told[0].message


# -- the how-to's examples, run against a driver that records ------------------------------
HOWTO = Path(__file__).parent.parent / "docs" / "how-to" / "reservations.md"
BLOCK = re.compile(r'```python title="([^"]+)"\n(.*?)```', re.S)


class Recording:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[object, ...], dict[str, object]]] = []
        self.principal = "team-a"

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kw: self.calls.append((name, args, kw))


def howto(name: str) -> dict[str, Any]:
    code = dict(BLOCK.findall(HOWTO.read_text()))[name]
    scope: dict[str, Any] = {}
    exec(compile(code, name, "exec"), scope)
    return scope


def offer(resources: str) -> WireOffer:
    return WireOffer(offer_id="o1", framework_id="f", slave_id="db-1", hostname="h",
                     resources=R(resources))  # fmt: skip


def test_the_howtos_framework_reserves_then_launches_on_its_reservation() -> None:
    keeper = howto("keeper.py")["Keeper"]()
    driver = Recording()
    asyncio.run(keeper.resource_offers(driver, [offer("cpus:2;mem:1024")]))
    [(name, args, kw)] = driver.calls
    assert name == "accept_offers"
    [op] = kw["operations"]  # type: ignore[misc]
    assert (
        conversion(op.type, op.resources.millis)[1] == R("cpus(team-a,):1;mem(team-a,):256").millis
    )
    driver.calls.clear()
    asyncio.run(
        keeper.resource_offers(driver, [offer("cpus(team-a,team-a):1;mem(team-a,team-a):256")])
    )
    [(name, args, _)] = driver.calls
    [task] = args[1]  # type: ignore[misc]
    assert name == "launch_tasks"
    assert task.resources == R("cpus(team-a,team-a):1;mem(team-a,team-a):256")


def test_the_howtos_stateful_task_names_its_volume() -> None:
    driver = Recording()
    howto("stateful.py")["launch_on"](
        driver, offer("cpus:1;mem:512;disk(team-a)[pg-data:data]:1024")
    )
    [(_, args, _)] = driver.calls
    [task] = args[1]  # type: ignore[misc]
    assert "disk(team-a)[pg-data:data]" in task.resources


def test_a_volume_is_never_put_where_a_link_leads_out_of_the_sandbox(tmp_path: Path) -> None:
    """A task id used again finds its old sandbox: a link its first task left where the
    volume goes is refused, never followed (the slave would chmod or mount its target)."""
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o755)
    (sandbox / "data").symlink_to(outside)
    with pytest.raises(OSError, match="not a directory"):
        volumes.prepare(tmp_path / "work", sandbox, ["disk(a)[v:data]"], None, link=False)
    (sandbox / "data").unlink()
    (sandbox / "deep").symlink_to(outside)
    with pytest.raises(OSError, match="not a directory"):
        volumes.prepare(tmp_path / "work", sandbox, ["disk(a)[v:deep/data]"], None, link=False)
    assert stat.S_IMODE(outside.stat().st_mode) == 0o755
    assert list(outside.iterdir()) == []
    binds = volumes.prepare(tmp_path / "work", sandbox, ["disk(a)[w:x/y]"], None, link=False)
    assert binds.mounts == ((str(tmp_path / "work/volumes/roles/a/w"), str(sandbox / "x/y")),)


def test_a_slaves_configured_resources_are_its_total_with_what_it_kept_undone() -> None:
    """What the master reads of a slave's --resources from its total, to apply its own
    word on the kept part (dynamic reservations and volumes) on them."""
    from protocol.wire.reservations import configured_of, with_checkpointed

    configured = R("cpus:4;cpus(team):2;mem:1024;disk(team):100").millis
    kept = R("cpus(team,alice):1;cpus(team)(team/a,bob):1;disk(team)[v1:data]:40").millis
    total, dropped = with_checkpointed(configured, kept)
    assert not dropped
    assert configured_of(total) == configured


@given(
    size=st.integers(min_value=1, max_value=10**9),
    change=st.integers(min_value=1, max_value=10**9),
    stack=st.sampled_from(["(r)", "(r,p)", "(r)(r/s,p)"]),
)
def test_resizing_a_volume_keeps_its_disk_and_undoes_itself(
    size: int, change: int, stack: str
) -> None:
    # GROW_VOLUME and SHRINK_VOLUME only move disk between a volume and its own
    # reservation: what they consume and make are equal by what it is and whose, and a
    # grow then a shrink by the same amount gives back what was
    volume, disk = f"disk{stack}[v:d]", f"disk{stack}"
    used, made = conversion("GROW_VOLUME", {volume: size}, addition={disk: change})
    assert stripped(used) == stripped(made)
    assert {role_of(k) for k in made} == {role_of(k) for k in used} == {role_of(disk)}
    back, again = conversion("SHRINK_VOLUME", made, subtract=change)
    assert back == made
    assert again == used
    with pytest.raises(ValueError, match="less than the volume's size"):
        conversion("SHRINK_VOLUME", {volume: size}, subtract=size)
