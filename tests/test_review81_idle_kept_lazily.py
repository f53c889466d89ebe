"""Idle reservations kept only once read (`IdleReservations`, review81): an allocator whose
idle reservations are read after every step and one that reads them only when its own
quota stage asks (or at the end) make the same offers, and both count what is reserved
and free on the slaves -- through rounds, releases, declines, slaves coming, going and
changing, operator and framework RESERVE/UNRESERVE, shared volumes in several copies,
tasks nobody owns (hold_unowned, adopt, release_unowned) and quotas set midway."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_reservations import idle_of  # (each role's reserved resources free on the slaves)

from master.allocation.allocator import Allocator, AllocatorError
from master.allocation.quota import Quota
from protocol.wire.resources import Resources

R = Resources.parse
ROLES = ["a", "a/b", "b"]
PART = st.tuples(st.sampled_from(["", *ROLES]), st.integers(1, 3))
SLAVE = st.tuples(st.lists(PART, min_size=1, max_size=3), st.sampled_from(["", "a", "b"]))
STEPS = [
    "round",
    "release",
    "decline",
    "slave+",
    "slave-",
    "update",
    "reserve",
    "unreserve",
    "fw-reserve",
    "quota",
    "orphan",
    "adopt",
    "free-orphan",
    "copy",
    "deactivate",
]
OPS = st.lists(st.tuples(st.sampled_from(STEPS), st.integers(0, 7)), max_size=40)


def total_of(n: int, parts: list[tuple[str, int]], volume: str) -> Resources:
    """cpus and mem per part (reserved for its role, or not), and a shared volume of
    `volume`'s role beside its reserved disk."""
    out = Resources()
    for role, cpus in parts:
        mark = f"({role})" if role else ""
        out = out + Resources({f"cpus{mark}": cpus, f"mem{mark}": 100 * cpus})
    if volume:
        out = out + R(f"disk({volume}):50;disk({volume})[v{n}:data]<SHARED>:100")
    return out


Held = list[tuple[str, str, Resources]]


@settings(max_examples=500, deadline=None)
@given(
    st.sampled_from(["drf", "hdrf"]),
    st.lists(SLAVE, min_size=1, max_size=4),
    OPS,
)
def test_idle_reservations_read_late_are_what_they_are_read_early(
    policy: str, slaves: list[tuple[list[tuple[str, int]], str]], ops: list[tuple[str, int]]
) -> None:
    early, late = Allocator(policy), Allocator(policy)
    pool = [total_of(n, parts, volume) for n, (parts, volume) in enumerate(slaves)]
    for a in (early, late):
        a.add_slave("s0", pool[0])
        for n, role in enumerate(ROLES * 2):
            a.add_framework(f"f{n}", role)
            a.take_shared(f"f{n}")
    held: Held = []
    orphans: list[tuple[str, Resources, str]] = []
    now = 0.0

    def both(method: str, *args: object, **kw: object) -> object:
        """`method` (`roles.set_quota`: a path) of each with these; the same result or the
        same refusal."""
        out = []
        for a in (early, late):
            call: Any = a
            for name in method.split("."):
                call = getattr(call, name)
            try:
                out.append(call(*args, **kw))
            except AllocatorError as e:
                out.append(("refused", str(e)))
        assert out[0] == out[1]
        return out[0]

    for op, i in ops:
        now += 1
        sid = f"s{i % len(pool)}"
        known = sid in early.slaves
        if op == "round":
            offers = both("allocate", now)
            assert isinstance(offers, list)
            held += [(o.framework_id, o.slave_id, o.resources) for o in offers]
        elif op in ("release", "decline") and held:
            f, s, r = held.pop(i % len(held))
            both("recover", f, s, r, refuse_seconds=3 if op == "decline" else None, now=now)
        elif op == "slave+" and len(early.slaves) < len(pool):
            sid = next(f"s{n}" for n in range(len(pool)) if f"s{n}" not in early.slaves)
            i = int(sid[1:])
            # a re-registering slave: a known framework's task, and one of nobody known
            used = {"f0": R("cpus:1"), "ghost": R("mem:50")} if i % 2 else None
            if used is not None and not (pool[i].get("cpus") and pool[i].get("mem")):
                used = None
            if both("add_slave", sid, pool[i], used=used) is None and used is not None:
                held.append(("f0", sid, R("cpus:1")))
                orphans.append((sid, R("mem:50"), ""))
        elif op == "slave-" and known and len(early.slaves) > 1:
            both("remove_slave", sid)
            held = [h for h in held if h[1] != sid]
            orphans = [o for o in orphans if o[0] != sid]
        elif op == "update" and known:  # back with more reserved for a role, or less
            total = early.slaves[sid].total
            extra = R(f"cpus({ROLES[i % 3]}):1;mem({ROLES[i % 3]}):10")
            new = total + extra if i % 2 else total.subtract_clamped(R("mem:100"))
            both("update_slave", sid, new)
        elif op == "reserve" and known and early.slaves[sid].unallocated.get("cpus", 0) >= 1000:
            role = ROLES[i % 3]
            both("update_available", sid, R("cpus:1"), R(f"cpus({role},p):1"))
        elif op == "unreserve" and known:
            free = early.slaves[sid].unallocated
            mine = sorted(k for k, v in free.items() if v >= 1000 and k.startswith("cpus("))
            if mine:
                both("update_available", sid, R(f"{mine[0]}:1"), R("cpus:1"))
        elif op == "fw-reserve" and held:  # a framework reserves a cpu of its offer
            n = i % len(held)
            f, s, r = held[n]
            if r.millis.get("cpus", 0) >= 1000:
                role = early.frameworks[f].role
                new = R(f"cpus({role},p):1")
                if both("update_allocation", f, s, R("cpus:1"), new) is None:
                    held[n] = (f, s, r.subtract_clamped(R("cpus:1")) + new)
        elif op == "quota":
            role = ROLES[i % 3]
            quota = Quota(R("cpus:2;mem:100"), R("cpus:4") if i % 2 else None)
            both("roles.set_quota", role, quota)
        elif op == "orphan" and known and early.slaves[sid].unallocated.get("cpus", 0) >= 1000:
            role = ROLES[i % 3] if i % 2 else ""
            if both("hold_unowned", sid, R("cpus:1"), role) is None:
                orphans.append((sid, R("cpus:1"), role))
        elif op == "adopt" and orphans:
            s, r, role = orphans[i % len(orphans)]
            if not role:
                orphans.remove((s, r, role))
                f = f"f{i % 6}"
                both("adopt", f, s, r)
                held.append((f, s, r))
        elif op == "free-orphan" and orphans:
            s, r, role = orphans.pop(i % len(orphans))
            both("release_unowned", s, r, role)
        elif op == "copy":  # a task uses a volume it was offered once more
            volumes = [h for h in held if early.slaves[h[1]].shared.intersection(h[2].millis)]
            if volumes:
                f, s, r = volumes[i % len(volumes)]
                key = sorted(early.slaves[s].shared.intersection(r.millis))[0]
                copy = R(f"{key}:100")
                if both("add_copies", f, s, copy) is None:
                    held.append((f, s, copy))
        elif op == "deactivate" and known:
            both("deactivate_slave" if i % 2 else "activate_slave", sid)
        # the one read from the start: what is reserved and free on the slaves
        assert early.idle_reserved() == idle_of(early)
    # the other, read (maybe) for the first time here
    assert late.idle_reserved() == idle_of(late) == early.idle_reserved()
