"""The asks a new leader keeps about tasks on slaves still recovering (no I/O)."""

from __future__ import annotations

import pytest

from master import reconcile_waits
from master.reconcile_waits import ReconcileWaits


def test_asks_are_taken_by_slave_once_and_bounded_by_framework(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(reconcile_waits, "MAX_WAITING", 3)
    waits = ReconcileWaits()
    for task in ("t1", "t2", "t1"):  # (an ask again is one ask)
        waits.keep("s1", "f", task)
    waits.keep("s2", "f", "t3")
    waits.keep("s2", "f", "t4")  # past the bound: its own retry answers it
    waits.keep("s2", "g", "t5")  # another framework's bound is its own
    assert len(waits) == 4
    assert waits.take("s1") == {"f": {"t1", "t2"}}
    assert waits.take("s1") == {}
    waits.keep("s2", "f", "t6")  # room again
    assert waits.take("s2") == {"f": {"t3", "t6"}, "g": {"t5"}}
    assert len(waits) == 0


def test_a_gone_frameworks_asks_are_dropped() -> None:
    waits = ReconcileWaits()
    waits.keep("s1", "f", "t1")
    waits.keep("s1", "g", "t2")
    waits.forget("f")
    assert waits.take("s1") == {"g": {"t2"}}
    waits.forget("nobody")
    assert len(waits) == 0


def test_an_ask_past_the_bound_leaves_nothing_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ask not kept (its framework at the bound) is no entry: the slave's later
    take finds nothing of it, after the framework's other asks were answered."""
    monkeypatch.setattr(reconcile_waits, "MAX_WAITING", 1)
    waits = ReconcileWaits()
    waits.keep("s1", "f", "t1")
    waits.keep("s2", "f", "t2")  # past the bound
    assert waits.take("s1") == {"f": {"t1"}}
    assert waits.take("s2") == {}
    assert len(waits) == 0
