"""The role tree: promises down the tree, and the lecture's starvation of a leaf under
naive HDRF that min-satisfaction HDRF avoids (tasks of 1% of a resource, served one by one)."""

from __future__ import annotations

import pytest

from master.allocation.role_tree import RoleTree, check_role
from master.allocation.sorter import Total
from protocol.wire.resources import Resources

TASKS = {"x": Resources(cpus=0.01), "p/y": Resources(cpus=0.01), "p/z": Resources(mem=0.01)}


class Cluster:
    """One node of <1 cpu, 1 mem>, three roles, and each role's running tasks."""

    def __init__(self, policy: str) -> None:
        total = Total()
        total.add(Resources(cpus=1, mem=1))
        self.tree = RoleTree(policy, total)
        self.free = Resources(cpus=1, mem=1)
        self.running = dict.fromkeys(TASKS, 0)
        for role in TASKS:
            self.tree.add_role(role)
            self.tree.set_wanting(role, True)

    def fill(self) -> None:
        """Serve the first role whose task fits, one task at a time, until none fits."""
        while True:
            role = self.tree.first(lambda r: self.free.contains(TASKS[r]))
            if role is None:
                return
            self.free = self.free - TASKS[role]
            self.tree.allocated(role, TASKS[role])
            self.running[role] += 1

    def finish(self, role: str, n: int) -> None:
        for _ in range(n):
            self.running[role] -= 1
            self.tree.unallocated(role, TASKS[role])
            self.free = self.free + TASKS[role]


@pytest.mark.parametrize("policy", ["hdrf", "naive-hdrf"])
def test_both_reach_the_lectures_allocation_from_scratch(policy: str) -> None:
    c = Cluster(policy)
    c.fill()
    assert c.running == {"x": 50, "p/y": 50, "p/z": 100}  # (1/2, 0), (1/2, 0), (0, 1)


def test_naive_hdrf_starves_a_leaf_that_went_idle_and_came_back() -> None:
    c = Cluster("naive-hdrf")
    c.fill()
    c.tree.set_wanting("p/y", False)  # y runs out of work
    c.finish("p/y", 50)
    c.fill()  # x takes the freed CPU
    assert c.running["x"] == 100
    c.tree.set_wanting("p/y", True)  # y has work again
    for _ in range(100):  # every task of x ends in turn, and its CPU is offered anew
        c.finish("x", 1)
        c.fill()
    assert c.running["p/y"] == 0  # starved: x (1/2 < p's 1) always goes first
    assert c.running["x"] == 100


def test_min_satisfaction_hdrf_gives_it_back_its_promise() -> None:
    c = Cluster("hdrf")
    c.fill()
    c.tree.set_wanting("p/y", False)
    c.finish("p/y", 50)
    c.fill()
    assert c.running["x"] == 100  # work-conserving while y is idle
    c.tree.set_wanting("p/y", True)
    for _ in range(100):
        c.finish("x", 1)
        c.fill()
    # y is promised 1/4 (half of p's half), x 1/2: the CPU x frees goes to y until both
    # are equally far above their promises (2/3 and 1/3: each 4/3 of its promise)
    assert c.running == {"x": 67, "p/y": 33, "p/z": 100}
    assert c.running["p/y"] >= 25
    assert c.running["x"] >= 50


def test_promises_multiply_down_the_tree() -> None:
    tree = RoleTree("hdrf")
    for role, weight in {"y": 3, "y/research": 2, "y/prod": 8, "other": 7}.items():
        tree.set_weight(role, weight)
    for role in ("y/research", "y/prod", "other"):
        tree.add_role(role)
    assert tree.promise("y/research") == pytest.approx(0.06)
    assert tree.promise("y/prod") == pytest.approx(0.24)
    assert tree.promise("other") == pytest.approx(0.70)
    tree.add_role("y")  # y's own frameworks: a child "." of weight 1 beside its sub-roles
    assert tree.promise("y/research") == pytest.approx(0.3 * 2 / 11)


@pytest.mark.parametrize("bad", ["", "a//b", "a/*", "+", "#", "a/../b", "./a", "x" * 65])
def test_bad_role_names_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="role"):
        check_role(bad)


def test_a_pools_ordering_outlives_its_last_framework() -> None:
    """A roles file sets `batch` fifo; a framework comes to `batch/a` and goes, and the
    tree forgets the empty nodes (as it must: a role nobody is in costs nothing). The next
    framework found `batch` ordered `drf`: the operator's ordering was gone until the
    master read the file again (a weight set so was kept)."""
    from master.allocation.allocator import Allocator

    a = Allocator("hdrf")
    a.roles.set_ordering("batch", "fifo")
    a.add_framework("f1", "batch/a")
    a.remove_framework("f1")
    a.add_framework("f2", "batch/b")
    assert "batch" in a.roles.fifo_pools()
