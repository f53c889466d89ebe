"""Shared persistent volumes (Mesos's `Resource.shared`): their text and JSON forms, and
the allocation's invariants under any sequence of rounds, launches, releases and
declines.

What holds: everything non-shared is allocated at most once (handed out plus free is
each slave's total, identity by identity). A shared volume is allocated in copies, any
number of them, each the whole volume; a round offers each at most once a slave (so to
one framework a round), only to frameworks of its role that take shared resources; the
slave's free books count it once (free while no copy is out), and a framework's share
counts it once however many copies it holds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from master.allocation.allocator import Allocator, AllocatorError
from master.mesos_api.scheduler_calls import parse_call, subscribe_of
from protocol.mesos_json import resources_from_mesos, resources_to_mesos
from protocol.mesos_reservations import identity_fields, identity_of
from protocol.wire.messages import Subscribe
from protocol.wire.reservations import (
    ReservationError,
    conversion,
    is_shared,
    offered_to,
    parse_key,
    role_of,
    shared_once,
)
from protocol.wire.resources import Resources
from protocol.wire.values import FrameworkCapability

R = Resources.parse
SHARED = "disk(a,p)[v1:data]<SHARED>"


def test_a_shared_volume_is_marked_in_its_key_and_in_mesos_json() -> None:
    rid = parse_key(SHARED)
    assert rid.volume is not None
    assert rid.volume.shared
    assert rid.key() == SHARED
    assert not parse_key("disk(a,p)[v1:data]").volume.shared  # type: ignore[union-attr]
    fields = identity_fields(SHARED)
    assert fields["shared"] == {}
    assert fields["disk"]["persistence"] == {"id": "v1"}
    assert identity_of(fields, "disk") == SHARED  # (the v1 API's form read back)
    assert "shared" not in identity_fields("disk(a,p)[v1:data]")
    # CREATE makes it of reserved disk, DESTROY gives the disk back
    assert conversion("CREATE", {SHARED: 5}) == ({"disk(a,p)": 5}, {SHARED: 5})
    assert conversion("DESTROY", {SHARED: 5}) == ({SHARED: 5}, {"disk(a,p)": 5})


def test_the_mesos_apis_speak_shared_volumes_and_the_capability() -> None:
    # offers and state carry `"shared": {}` on a shared volume, and read it back
    r = R(f"cpus:1;disk(a,p):4;{SHARED}:4")
    as_json = resources_to_mesos(r, "a")
    [shared] = [j for j in as_json if "shared" in j]
    assert shared["disk"]["persistence"]["id"] == "v1"
    assert resources_from_mesos(as_json) == r
    # a SUBSCRIBE declaring SHARED_RESOURCES is a framework taking shared resources
    info = {"name": "a", "role": "a", "capabilities": [{"type": "SHARED_RESOURCES"}]}
    call = parse_call({"type": "SUBSCRIBE", "subscribe": {"framework_info": info}})
    sub = subscribe_of(call, "a", "inbox", "inc")
    assert isinstance(sub, Subscribe)
    assert sub.capabilities == [FrameworkCapability.SHARED_RESOURCES]


@pytest.mark.parametrize("bad", ["disk(a)[v:d]<shared>", "disk(a)<SHARED>", "disk(a)[v:d]<X>"])
def test_only_a_volume_is_shared_and_only_so(bad: str) -> None:
    with pytest.raises(ReservationError):
        parse_key(bad)
    with pytest.raises(ReservationError, match="only a persistent volume"):
        identity_of({"name": "disk", "role": "a", "shared": {}}, "disk")


def test_a_slave_counts_a_shared_volume_used_by_several_tasks_once() -> None:
    used = {SHARED: 300, "cpus": 2000}
    assert shared_once(used, {SHARED: 100, "cpus": 4000}) == {SHARED: 100, "cpus": 2000}
    assert shared_once(used, {"cpus": 4000}) == used  # (not the slave's: as it is)


def test_a_shared_volume_ends_only_with_its_last_copy_and_copies_are_whole() -> None:
    a = Allocator("drf")
    a.add_slave("s", R(f"cpus:2;mem:64;{SHARED}:100"))
    for f in ("f1", "f2"):
        a.add_framework(f, "a")
        a.take_shared(f)
    a.allocate_existing("f1", "s", R(f"{SHARED}:100"))
    a.allocate_existing("f2", "s", R(f"{SHARED}:100"))
    with pytest.raises(AllocatorError, match="held by others"):
        a.update_allocation("f1", "s", R(f"{SHARED}:100"), R("disk(a,p):100"))
    with pytest.raises(AllocatorError, match="a copy is the whole volume"):
        a.allocate_existing("f1", "s", R(f"{SHARED}:50"))
    a.recover("f2", "s", R(f"{SHARED}:100"))
    a.update_allocation("f1", "s", R(f"{SHARED}:100"), R("disk(a,p):100"))
    assert a.slaves["s"].total == R("cpus:2;mem:64;disk(a,p):100")
    assert not a.slaves["s"].shared


# -- properties ----------------------------------------------------------------------------

ROLES = ["a", "a/b", "b"]
OPS = st.lists(
    st.tuples(
        st.sampled_from(["round", "release", "decline", "copy", "fw+", "fw-", "slave-"]),
        st.integers(0, 7),
    ),
    max_size=50,
)


def slave_total(n: int) -> Resources:
    """A slave with unreserved cpus and mem, role a's disk, and a shared volume of a's."""
    return R(f"cpus:4;mem:400;disk(a,p):100;disk(a,p)[v{n}:data]<SHARED>:100")


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["drf", "naive-hdrf", "hdrf"]), st.integers(1, 3), OPS)
def test_shared_volumes_are_offered_once_a_round_and_count_once(
    policy: str, slaves: int, ops: list[tuple[str, int]]
) -> None:
    a = Allocator(policy)
    for n in range(slaves):
        a.add_slave(f"s{n}", slave_total(n))
    held: list[tuple[str, str, Resources]] = []  # what is out, a copy of a volume each
    now = 0.0

    def add(i: int) -> None:  # (even ones take shared resources)
        a.add_framework(f"f{i}", ROLES[i % len(ROLES)])
        a.take_shared(f"f{i}", i % 2 == 0)

    for i in range(0, 8, 3):
        add(i)
    for op, i in ops:
        now += 1
        fid, sid = f"f{i}", f"s{i % slaves}"
        if op == "fw+" and fid not in a.frameworks:
            add(i)
        elif op == "fw-" and fid in a.frameworks:
            a.remove_framework(fid)
            held = [h for h in held if h[0] != fid]
        elif op == "slave-" and sid in a.slaves:
            a.remove_slave(sid)
            held = [h for h in held if h[1] != sid]
        elif op == "round":
            seen: set[tuple[str, str]] = set()
            for offer in a.allocate(now):
                fw = a.frameworks[offer.framework_id]
                for key in offer.resources:
                    owner = role_of(key)
                    assert owner is None or offered_to(owner, fw.role), (key, fw.role)
                    if is_shared(key):
                        assert fw.shared, (key, fw.framework_id)  # took shared resources
                        assert (offer.slave_id, key) not in seen  # once a slave a round
                        seen.add((offer.slave_id, key))
                held.append((offer.framework_id, offer.slave_id, offer.resources))
        elif op in ("release", "decline") and held:
            f, s, r = held.pop(i % len(held))
            a.recover(f, s, r, refuse_seconds=3 if op == "decline" else None, now=now)
        elif op == "copy" and held:  # a task more on a shared volume its framework holds
            f, s, r = held[i % len(held)]
            for key in filter(is_shared, r):
                a.add_copies(f, s, R(f"{key}:100"))
                held.append((f, s, R(f"{key}:100")))
        for s, book in a.slaves.items():
            out = sum((r for _, ss, r in held if ss == s), Resources())
            free = a.free(s)
            for key, amount in book.total.millis.items():
                if is_shared(key):  # free while no copy is out; allocated once
                    copies = out.get_millis(key) // amount
                    assert free.get_millis(key) == (0 if copies else amount)
                    assert a.held_on(s).get_millis(key) == (amount if copies else 0)
                else:  # nothing else allocated twice
                    assert out.get_millis(key) + free.get_millis(key) == amount, key
        for f in a.frameworks:  # a framework's share counts each volume once
            share: dict[str, int] = {}
            volumes: set[tuple[str, str]] = set()
            for ff, s, r in held:
                for key, amount in r.millis.items() if ff == f else ():
                    if is_shared(key):
                        if (s, key) in volumes:
                            continue
                        volumes.add((s, key))
                    base = parse_key(key).base
                    share[base] = share.get(base, 0) + amount
            assert a.allocation(f) == Resources.from_millis(share)


NESTED = {"fa": "a", "fb": "a/b", "fc": "a/b/c", "fd": "a/d"}
VA = "disk(a)[va:data]<SHARED>"


@pytest.mark.parametrize("policy", ["hdrf", "naive-hdrf", "flat"])
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(NESTED)), st.booleans()), max_size=30))
def test_a_role_node_counts_a_shared_volume_once_whoever_below_holds_copies(
    policy: str, steps: list[tuple[str, bool]]
) -> None:
    # Frameworks of a role and of its sub-roles take and give back copies of the role's
    # shared volume in any order: every node of the tree holds the volume once while any
    # copy is in its subtree, and not at all when none is (Mesos's sorter counts a shared
    # resource once a node), and a framework's cpus beside it as they are.
    a = Allocator(policy)
    a.add_slave("s", R(f"cpus:40;mem:1000;disk(a):100;{VA}:800"))
    for fid, role in NESTED.items():
        a.add_framework(fid, role)
        a.take_shared(fid)
    copies = dict.fromkeys(NESTED, 0)
    for fid, take in steps:
        if take:
            a.allocate_existing(fid, "s", R(f"cpus:1;{VA}:800"))
            copies[fid] += 1
        elif copies[fid]:
            a.recover(fid, "s", R(f"cpus:1;{VA}:800"))
            copies[fid] -= 1
        for node in ("a", "a/b", "a/b/c", "a/d"):
            below = [f for f, r in NESTED.items() if r == node or r.startswith(node + "/")]
            held = a.quota_stage.held_by_role(node)  # (its subtree's, and its idle reserved)
            n = sum(copies[f] for f in below)
            assert held.get("cpus", 0) == 1000 * n, (node, held)
            # role a's: the volume (a copy out, or idle) and its idle reserved disk
            want = 900_000 if node == "a" else 800_000 if n else 0
            assert held.get("disk", 0) == want, (node, held)
