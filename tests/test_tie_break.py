"""Equal shares take turns, as in Mesos's DRF sorter: ties are broken by how many times a
client was allocated to, then by name -- in the flat sorter and at every level of the role
tree, for every fair policy. `fifo` keeps arrival order."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from master.allocation.allocator import Allocator
from master.allocation.sorter import Sorter
from protocol.wire.resources import Resources

FAIR = ["drf", "asset", "cpu", "hdrf", "naive-hdrf", "flat"]
TREES = ["hdrf", "naive-hdrf", "flat"]
SLAVE = Resources(cpus=4, mem=4096)

# two frameworks whose shares are equal whenever neither holds anything: side by side in
# one role (the framework sorter), in two roles (the role sorter), and for tree
# policies as siblings deeper down, or in pools on different branches
PLACES = [("*", "*"), ("a", "b"), ("b", "a")]
TREE_PLACES = [*PLACES, ("eng/a", "eng/b"), ("eng/x/a", "ops/y/b"), ("eng", "eng/sub")]


def turns(policy: str, roles: tuple[str, str], n: int) -> dict[str, int]:
    """n allocation rounds in which each offer comes straight back without a filter (a
    task that ended, an offer rescinded): how many each framework was offered."""
    allocator = Allocator(policy)
    allocator.add_slave("s0", SLAVE)
    for framework, role in zip(("f1", "f2"), roles, strict=True):
        allocator.add_framework(framework, role)
    got = {"f1": 0, "f2": 0}
    for now in range(n):
        for a in allocator.allocate(float(now)):
            got[a.framework_id] += 1
            allocator.recover(a.framework_id, a.slave_id, a.resources)
    assert sum(got.values()) == n
    return got


@settings(max_examples=60, deadline=None)
@given(
    policy=st.sampled_from(FAIR),
    place=st.sampled_from(TREE_PLACES),
    n=st.integers(1, 40),
)
def test_equal_shares_each_get_half_of_what_comes_back(
    policy: str, place: tuple[str, str], n: int
) -> None:
    if policy not in TREES and place not in PLACES:
        place = PLACES[1]  # nested roles need a tree policy
    got = turns(policy, place, n)
    assert abs(got["f1"] - n / 2) <= 1, got
    assert abs(got["f2"] - n / 2) <= 1, got


@pytest.mark.parametrize("place", PLACES)
def test_fifo_keeps_arrival_order(place: tuple[str, str]) -> None:
    assert turns("fifo", place, 10) == {"f1": 10, "f2": 0}


def test_a_fifo_pool_keeps_arrival_order_among_its_children() -> None:
    allocator = Allocator("hdrf")
    allocator.roles.set_ordering("eng", "fifo")
    allocator.add_slave("s0", SLAVE)
    allocator.add_framework("f1", "eng/z")  # first to arrive, last by name
    allocator.add_framework("f2", "eng/a")
    for now in range(6):
        (a,) = allocator.allocate(float(now))
        assert a.framework_id == "f1"
        allocator.recover(a.framework_id, a.slave_id, a.resources)


def test_ties_go_to_fewer_allocations_then_to_the_name() -> None:
    sorter = Sorter("drf")
    sorter.add_total(Resources(cpus=10, mem=10))
    for name in ("b", "a", "c"):  # registration order is not the tie-break
        sorter.add(name)
    assert list(sorter.sort()) == ["a", "b", "c"]
    sorter.allocated("a", Resources(cpus=1))
    sorter.unallocated("a", Resources(cpus=1))  # giving back keeps the count
    assert list(sorter.sort()) == ["b", "c", "a"]
    assert sorter.allocation_count("a") == 1
