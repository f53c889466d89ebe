"""What a removed framework's tasks hold while they die counts in their role's share
(`Allocator.hold_unowned`'s role): the role stays in the order, offered nothing, until
they end, and its principal's next framework is not first for the room they still use."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from master.allocation.allocator import Allocator
from protocol.wire.resources import Resources, add_millis

CPU = Resources(cpus=1, mem=256)


def listed(a: Allocator) -> set[str]:
    """The roles the operator's views show (every role node)."""
    return {view.role for view in a.roles.views()}


def cluster(policy: str = "hdrf") -> Allocator:
    a = Allocator(policy)
    a.add_slave("s1", Resources(cpus=4, mem=4096))
    for fid, role in (("m1", "mallory"), ("h1", "honest")):
        a.add_framework(fid, role)
    return a


def test_a_torn_down_frameworks_dying_tasks_keep_its_role_behind_the_others() -> None:
    for policy in ("hdrf", "drf"):
        a = cluster(policy)
        a.allocate_existing("m1", "s1", CPU + CPU)
        a.allocate_existing("h1", "s1", CPU)
        a.remove_framework("m1")
        a.hold_unowned("s1", CPU + CPU, "mallory")  # (its tasks in their kill grace)
        a.add_framework("m2", "mallory")  # the same principal, subscribed again
        assert list(a.order()) == ["h1", "m2"], policy
        a.release_unowned("s1", CPU + CPU, "mallory")  # the slave says they ended
        assert list(a.order()) == ["m2", "h1"], policy
        assert a.free("s1") == Resources(cpus=3, mem=3840)


def test_a_role_held_only_by_dying_tasks_is_offered_nothing_and_leaves_with_them() -> None:
    a = cluster()
    a.allocate_existing("m1", "s1", CPU)
    a.remove_framework("m1")
    a.hold_unowned("s1", CPU, "mallory")
    assert "mallory" in listed(a)
    assert list(a.order()) == ["h1"]
    assert a.roles.held("mallory") == CPU.millis
    a.release_unowned("s1", CPU, "mallory")
    assert "mallory" not in listed(a)


def test_a_slave_removed_takes_its_dying_holds_out_of_their_roles() -> None:
    a = cluster()
    a.add_slave("s2", Resources(cpus=4, mem=4096))
    a.remove_framework("m1")
    a.hold_unowned("s1", CPU, "mallory")
    a.hold_unowned("s2", CPU, "mallory")
    a.remove_slave("s1")
    assert a.roles.held("mallory") == CPU.millis
    a.remove_slave("s2")
    assert "mallory" not in listed(a)


@given(st.lists(st.tuples(st.sampled_from(["hold", "release", "add", "remove"]),
                          st.sampled_from(["mallory", "honest", "eng/web"]),
                          st.integers(1, 3)), max_size=30))  # fmt: skip
def test_a_roles_share_is_its_frameworks_and_its_dying_tasks_always(
    steps: list[tuple[str, str, int]],
) -> None:
    a = Allocator("hdrf")
    a.add_slave("s1", Resources(cpus=100, mem=102_400))
    charged: dict[str, list[Resources]] = {}
    frameworks: dict[str, str] = {}
    for n, (verb, role, cpus) in enumerate(steps):
        held = Resources(cpus=cpus)
        if verb == "hold":
            a.hold_unowned("s1", held, role)
            charged.setdefault(role, []).append(held)
        elif verb == "release" and charged.get(role):
            a.release_unowned("s1", charged[role].pop(), role)
        elif verb == "add":
            fid = f"f{n}"
            a.add_framework(fid, role)
            a.allocate_existing(fid, "s1", held)
            frameworks[fid] = role
        elif verb == "remove" and (theirs := [f for f, r in frameworks.items() if r == role]):
            a.remove_framework(theirs[0])
            del frameworks[theirs[0]]
        for each in {*charged, *frameworks.values()}:
            want: dict[str, int] = {}
            for r in charged.get(each, []):
                add_millis(want, r.millis)
            for fid, r in frameworks.items():
                if r == each:
                    add_millis(want, a.allocation(fid).millis)
            in_order = each in listed(a)
            assert in_order == (bool(charged.get(each)) or each in frameworks.values())
            if in_order:
                assert {k: v for k, v in a.roles.held(each).items() if v} == want


def test_tasks_that_asked_for_a_long_kill_grace_are_held_as_long() -> None:
    """A slave's operator may allow kill graces past 60 s (--max-kill-grace): a slave that
    never says its tasks ended is believed only after the longest their policies asked."""
    from master.dying import HELD_AT_MOST, Dying, held_for

    assert held_for([]) == held_for([3.0]) == HELD_AT_MOST
    assert held_for([30.0, 200.0]) == 215.0
    book = Dying()
    book.add("s1", "m1", {"mallory": CPU}, 0.0, hold_for=held_for([200.0]))
    assert book.overdue(HELD_AT_MOST + 1) == []
    assert book.renew("s1", "m1", 100.0)  # (told again: its time from now)
    assert book.overdue(300.0) == []
    assert book.overdue(315.0) == [("s1", "m1", {"mallory": CPU})]
