"""The asks a new leader keeps about tasks on slaves still recovering (no I/O)."""

from __future__ import annotations

import pytest

from master import reconcile_waits
from master.reconcile_waits import ReconcileWaits


def test_asks_are_taken_by_slave_once_and_bounded_by_principal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(reconcile_waits, "MAX_WAITING", 3)
    waits = ReconcileWaits()
    for task in ("t1", "t2", "t1"):  # (an ask again is one ask)
        waits.keep("s1", "f", "alice", task)
    waits.keep("s2", "f", "alice", "t3")
    waits.keep("s2", "f", "alice", "t4")  # past the bound: its own retry answers it
    waits.keep("s2", "g", "bob", "t5")  # another principal's bound is its own
    assert len(waits) == 4
    assert waits.take("s1") == {"f": {"t1", "t2"}}
    assert waits.take("s1") == {}
    waits.keep("s2", "f", "alice", "t6")  # room again
    assert waits.take("s2") == {"f": {"t3", "t6"}, "g": {"t5"}}
    assert len(waits) == 0
    assert waits.kept_for("alice") == waits.kept_for("bob") == 0


def test_a_principals_frameworks_share_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A principal that registers more frameworks keeps no more asks: its second
    framework's asks past the bound are not kept, and another principal's room is whole."""
    monkeypatch.setattr(reconcile_waits, "MAX_WAITING", 2)
    waits = ReconcileWaits()
    for framework in ("f1", "f2", "f3"):
        waits.keep("s1", framework, "mallory", f"{framework}-t")
    assert waits.kept_for("mallory") == 2
    waits.keep("s1", "g", "bob", "t1")
    waits.keep("s2", "g", "bob", "t2")
    assert waits.kept_for("bob") == 2
    waits.forget("f1")  # a framework gone gives its principal its room back
    assert waits.kept_for("mallory") == 1
    waits.keep("s2", "f3", "mallory", "f3-t")
    assert waits.take("s1") == {"f2": {"f2-t"}, "g": {"t1"}}
    assert waits.take("s2") == {"g": {"t2"}, "f3": {"f3-t"}}
    assert len(waits) == 0
    assert waits.kept_for("mallory") == 0


def test_a_gone_frameworks_asks_are_dropped() -> None:
    waits = ReconcileWaits()
    waits.keep("s1", "f", "alice", "t1")
    waits.keep("s1", "g", "bob", "t2")
    waits.forget("f")
    assert waits.take("s1") == {"g": {"t2"}}
    waits.forget("nobody")
    assert len(waits) == 0


def test_an_ask_past_the_bound_leaves_nothing_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ask not kept (its principal at the bound) is no entry: the slave's later
    take finds nothing of it, after the principal's other asks were answered."""
    monkeypatch.setattr(reconcile_waits, "MAX_WAITING", 1)
    waits = ReconcileWaits()
    waits.keep("s1", "f", "alice", "t1")
    waits.keep("s2", "f", "alice", "t2")  # past the bound
    assert waits.take("s1") == {"f": {"t1"}}
    assert waits.take("s2") == {}
    assert len(waits) == 0
