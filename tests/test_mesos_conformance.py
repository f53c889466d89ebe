"""Apache Mesos's own allocation tests, replayed on ours.

One test per Mesos test that applies, named after it: `test_sorter_X` for
`DRFSorterTest.X` / `CommonSorterTest.X` (src/tests/sorter_tests.cpp), `test_allocator_X`
for `HierarchicalAllocatorTest.X` (src/tests/hierarchical_allocator_tests.cpp), each
driving our sorter, role tree or allocator as the Mesos test drives its own: the same
agents, frameworks, weights, quotas and allocation cycles, and the same expected order or
offers. Tests that need what drfmesos does not have are listed, with why, in
tests/MESOS_CONFORMANCE.md (checked against this module below, and against the docs'
"Where drfmesos differs from Mesos"). Where we differ on purpose, the test keeps our
expected result and says why.

Flat-role tests run on `drf` (the flat sorter), `naive-hdrf` (Mesos's hierarchical DRF)
and `hdrf`; nested-role tests on `naive-hdrf`, which is what Mesos does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections import deque
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from master.allocation.allocator import Allocator, AllocatorError
from master.allocation.quota import Quota
from master.allocation.role_tree import TREE_POLICIES, RoleTree
from master.allocation.sorter import Sorter, Total
from master.cycle import CycleConfig, OfferCycle
from master.master import Master
from protocol import logs
from protocol.tooling.credentials import Principal, Store
from protocol.wire.discrete import parse_resources
from protocol.wire.messages import (
    Accept,
    CheckpointResources,
    Error,
    Filters,
    OfferOperation,
    Rescind,
    Revive,
    Suppress,
    TaskInfo,
    TaskState,
)
from protocol.wire.messages import Offer as WireOffer
from protocol.wire.messages import Offers as WireOffers
from protocol.wire.reservations import shared_once, stripped
from protocol.wire.resources import Limit, Resources, add_millis, dominant_share
from protocol.wire.slave import Reregister, RunningTask
from protocol.wire.values import FrameworkCapability
from slave.kept_resources import KeptResources, Version

from harness.cycle import Books as CycleBooks
from harness.fakes import FakeFramework, FakeSlave
from harness.helpers import eventually
from harness.master import FAST, Cluster
from harness.master import cluster as cluster


def quantities(text: str) -> Resources:
    """Mesos's text form as the allocator counts it (`ports:[31000-32000]` is 1,001)."""
    return parse_resources(text)[0]


FLAT = ["drf", "naive-hdrf", "hdrf"]  # flat roles: every policy orders them alike
NESTED = ["naive-hdrf"]  # Mesos's hierarchical DRF


class MesosSorter:
    """Mesos's `DRFSorter` verbs over our flat `Sorter` or our `RoleTree`. Clients are
    added inactive and activated, as in Mesos; a removed client's allocation goes with
    it (Mesos's allocator recovers it first)."""

    def __init__(self, policy: str) -> None:
        self.total = Total()
        self.sorter: Sorter | RoleTree = (
            RoleTree(policy, self.total) if policy in TREE_POLICIES else Sorter(policy, self.total)
        )
        self.agents: dict[str, Resources] = {}
        self.held: dict[str, Resources] = {}

    def add_slave(self, agent: str, text: str) -> None:
        self.agents[agent] = quantities(text)
        self.total.add(self.agents[agent])

    def remove_slave(self, agent: str) -> None:
        self.total.remove(self.agents.pop(agent))

    def add(self, client: str) -> None:
        if isinstance(self.sorter, RoleTree):
            self.sorter.add(client)
        else:
            self.sorter.add(client, active=False)
        self.held[client] = Resources()

    def client(self, client: str, resources: str | None = None) -> None:
        """Mesos's tests' usual three steps: add, activate, allocate to."""
        self.add(client)
        self.activate(client)
        if resources is not None:
            self.allocated(client, resources)

    def remove(self, client: str) -> None:
        held = self.held.pop(client)
        if held:
            self.sorter.unallocated(client, held)
        self.sorter.remove(client)

    def activate(self, client: str) -> None:
        self.sorter.activate(client)

    def deactivate(self, client: str) -> None:
        self.sorter.deactivate(client)

    def update_weight(self, client: str, weight: float) -> None:
        self.sorter.set_weight(client, weight)  # any node's, before it exists too

    def allocated(self, client: str, resources: str) -> None:
        r = quantities(resources)
        self.sorter.allocated(client, r)
        self.held[client] = self.held[client] + r

    def unallocated(self, client: str, resources: str) -> None:
        r = quantities(resources)
        self.sorter.unallocated(client, r)
        self.held[client] = self.held[client] - r

    def update(self, client: str, old: str, new: str) -> None:
        """Mesos's `update` (an allocation changed in place): given back and taken anew.
        (Ours counts one allocation more; no test here has equal shares after it.)"""
        self.unallocated(client, old)
        self.allocated(client, new)

    def allocation(self, client: str) -> Resources:
        return self.sorter.allocation(client)

    def sort(self) -> list[str]:
        return list(self.sorter.sort())

    def contains(self, client: str) -> bool:
        return client in self.sorter

    def count(self) -> int:
        return len(self.held)


AGENT = "agentId"


# -- sorter_tests.cpp -----------------------------------------------------------------------


def _drf_steps(sorter: MesosSorter, name: Callable[[str], str]) -> None:
    """`DRFSorterTest.DRF`'s steps, with its client names mapped (Shallow/DeepHierarchy
    run the same steps on nested names)."""
    a, b, c, d, e, f = (name(x) for x in "abcdef")
    sorter.add_slave(AGENT, "cpus:100;mem:100")
    assert sorter.sort() == []
    sorter.client(a, "cpus:5;mem:5")
    sorter.client(b, "cpus:6;mem:6")
    assert sorter.sort() == [a, b]  # shares: a = .05, b = .06
    sorter.client(c, "cpus:1;mem:1")
    sorter.client(d, "cpus:3;mem:1")
    assert sorter.sort() == [c, d, a, b]  # a = .05, b = .06, c = .01, d = .03
    sorter.remove(a)
    sorter.unallocated(b, "cpus:4;mem:4")
    assert sorter.sort() == [c, b, d]  # b = .02, c = .01, d = .03
    sorter.client(e, "cpus:1;mem:5")
    sorter.remove_slave(AGENT)
    sorter.add_slave(AGENT, "cpus:50;mem:100")
    assert sorter.sort() == [c, b, e, d]  # b = .04, c = .02, d = .06, e = .05
    sorter.remove_slave(AGENT)
    sorter.add_slave(AGENT, "cpus:50;mem:200")
    sorter.client(f, "cpus:5;mem:1")
    sorter.allocated(c, "cpus:0;mem:15")
    assert sorter.sort() == [e, b, d, c, f]  # b = .04, c = .08, d = .06, e = .025, f = .1
    assert sorter.contains(b)
    assert not sorter.contains(a)
    assert sorter.count() == 5
    sorter.deactivate(d)
    assert sorter.contains(d)
    assert sorter.sort() == [e, b, c, f]
    assert sorter.count() == 5
    sorter.activate(d)
    assert sorter.sort() == [e, b, d, c, f]


@pytest.mark.parametrize("policy", FLAT)
def test_sorter_DRF(policy: str) -> None:
    _drf_steps(MesosSorter(policy), lambda x: x)


@pytest.mark.parametrize("policy", FLAT)
def test_sorter_WDRF(policy: str) -> None:
    sorter = MesosSorter(policy)
    sorter.add_slave(AGENT, "cpus:100;mem:100")
    sorter.client("a", "cpus:5;mem:5")
    sorter.client("b")
    sorter.update_weight("b", 2)
    sorter.allocated("b", "cpus:6;mem:6")
    assert sorter.sort() == ["b", "a"]  # a = .05, b = .03
    sorter.client("c", "cpus:4;mem:4")
    assert sorter.sort() == ["b", "c", "a"]  # a = .05, b = .03, c = .04
    sorter.client("d")
    sorter.update_weight("d", 10)
    sorter.allocated("d", "cpus:10;mem:20")
    assert sorter.sort() == ["d", "b", "c", "a"]  # a = .05, b = .03, c = .04, d = .02
    sorter.remove("b")
    assert sorter.sort() == ["d", "c", "a"]
    sorter.allocated("d", "cpus:10;mem:25")
    assert sorter.sort() == ["c", "d", "a"]  # a = .05, c = .04, d = .045
    sorter.client("e")
    sorter.update_weight("e", 0.1)
    sorter.allocated("e", "cpus:1;mem:1")
    assert sorter.sort() == ["c", "d", "a", "e"]  # a = .05, c = .04, d = .045, e = .1
    sorter.remove("a")
    assert sorter.sort() == ["c", "d", "e"]


@pytest.mark.parametrize("policy", FLAT)
def test_sorter_UpdateWeight(policy: str) -> None:
    sorter = MesosSorter(policy)
    sorter.add_slave(AGENT, "cpus:100;mem:100")
    sorter.client("a", "cpus:5;mem:5")
    sorter.client("b", "cpus:6;mem:6")
    assert sorter.sort() == ["a", "b"]
    sorter.update_weight("b", 2)  # flips the order
    assert sorter.sort() == ["b", "a"]


@pytest.mark.parametrize("policy", FLAT)
def test_sorter_AllocationCountTieBreak(policy: str) -> None:
    sorter = MesosSorter(policy)
    sorter.add_slave(AGENT, "cpus:100;mem:100")
    for client in "abcde":
        sorter.add(client)
    for client in "abcde":
        sorter.activate(client)
    # everyone holds the same; c was allocated to three times, d twice, the rest once
    sorter.allocated("a", "cpus:3;mem:3")
    sorter.allocated("b", "cpus:3;mem:3")
    sorter.allocated("c", "cpus:1;mem:1")
    sorter.allocated("c", "cpus:1;mem:1")
    sorter.allocated("c", "cpus:1;mem:1")
    sorter.allocated("d", "cpus:2;mem:2")
    sorter.allocated("d", "cpus:1;mem:1")
    sorter.allocated("e", "cpus:3;mem:3")
    assert sorter.sort() == ["a", "b", "e", "d", "c"]
    # giving back and taking again does not reset the count
    sorter.unallocated("c", "cpus:3;mem:3")
    assert sorter.sort() == ["c", "a", "b", "e", "d"]
    sorter.allocated("c", "cpus:3;mem:3")
    assert sorter.sort() == ["a", "b", "e", "d", "c"]  # c = 4
    # nor does deactivating and activating again
    sorter.deactivate("c")
    sorter.activate("c")
    assert sorter.sort() == ["a", "b", "e", "d", "c"]
    sorter.unallocated("c", "cpus:3;mem:3")
    sorter.allocated("c", "cpus:3;mem:3")
    assert sorter.sort() == ["a", "b", "e", "d", "c"]  # c = 5
    # allocations to an inactive client count too
    sorter.deactivate("a")
    sorter.unallocated("a", "cpus:1;mem:3")
    sorter.allocated("a", "cpus:1;mem:3")
    assert sorter.sort() == ["b", "e", "d", "c"]
    sorter.activate("a")
    assert sorter.sort() == ["b", "e", "a", "d", "c"]  # a = 2


@pytest.mark.parametrize("policy", NESTED)
def test_sorter_ShallowHierarchy(policy: str) -> None:
    _drf_steps(MesosSorter(policy), lambda x: f"{x}/{x}")


@pytest.mark.parametrize("policy", NESTED)
def test_sorter_DeepHierarchy(policy: str) -> None:
    depth = {"a": 5, "b": 4, "c": 3, "d": 2, "e": 6, "f": 2}
    _drf_steps(MesosSorter(policy), lambda x: "/".join([x] * depth[x]))


@pytest.mark.parametrize("policy", NESTED)
def test_sorter_HierarchicalAllocation(policy: str) -> None:
    sorter = MesosSorter(policy)
    sorter.add_slave(AGENT, "cpus:100;mem:100")
    for client in ("a", "b/c", "b/d"):
        sorter.add(client)
    for client in ("a", "b/c", "b/d"):
        sorter.activate(client)
    assert sorter.count() == 3
    assert sorter.contains("a")
    assert not sorter.contains("b")
    assert sorter.contains("b/c")
    assert sorter.sort() == ["a", "b/c", "b/d"]  # a = 0, b/c = 0, b/d = 0
    sorter.allocated("a", "cpus:6;mem:6")
    assert sorter.sort() == ["b/c", "b/d", "a"]
    sorter.allocated("b/c", "cpus:4;mem:4")
    sorter.allocated("b/d", "cpus:3;mem:3")
    assert sorter.sort() == ["a", "b/d", "b/c"]  # a = .06, b = .07 (b/d = .03, b/c = .04)
    assert sorter.allocation("a") == quantities("cpus:6;mem:6")
    assert sorter.allocation("b/c") == quantities("cpus:4;mem:4")
    assert sorter.allocation("b/d") == quantities("cpus:3;mem:3")
    sorter.allocated("a", "cpus:2;mem:2")
    assert sorter.sort() == ["b/d", "b/c", "a"]
    sorter.client("b/e/f")
    assert not sorter.contains("b/e")
    assert sorter.contains("b/e/f")
    assert sorter.sort() == ["b/e/f", "b/d", "b/c", "a"]
    sorter.allocated("b/e/f", "cpus:3.5;mem:3.5")
    assert sorter.sort() == ["a", "b/d", "b/e/f", "b/c"]
    # removing a client updates the share of the subtree it was in
    sorter.remove("b/e/f")
    assert not sorter.contains("b/e/f")
    assert sorter.count() == 3
    assert sorter.sort() == ["b/d", "b/c", "a"]
    # so does updating one
    sorter.update("b/c", "cpus:4;mem:4", "cpus:1;mem:1")
    assert sorter.sort() == ["b/c", "b/d", "a"]
    sorter.client("b/e/f", "cpus:3.5;mem:3.5")
    assert sorter.sort() == ["b/c", "b/d", "b/e/f", "a"]
    assert sorter.count() == 4


@pytest.mark.parametrize("policy", NESTED)
def test_sorter_HierarchicalIterationOrder(policy: str) -> None:
    sorter = MesosSorter(policy)
    sorter.add_slave(AGENT, "cpus:100;mem:100")
    for client in ("a/b", "c", "d", "d/e"):
        sorter.add(client)
    for client in ("a/b", "c", "d", "d/e"):
        sorter.activate(client)
    assert sorter.sort() == ["a/b", "c", "d", "d/e"]
    sorter.allocated("c", "cpus:8;mem:8")
    assert sorter.sort() == ["a/b", "d", "d/e", "c"]
    sorter.allocated("d", "cpus:3;mem:3")
    sorter.allocated("d/e", "cpus:2;mem:2")
    assert sorter.sort() == ["a/b", "d/e", "d", "c"]
    sorter.allocated("a/b", "cpus:6;mem:6")
    assert sorter.sort() == ["d/e", "d", "a/b", "c"]


@pytest.mark.parametrize("policy", NESTED)
def test_sorter_AddChildToLeaf(policy: str) -> None:
    sorter = MesosSorter(policy)
    sorter.add_slave(AGENT, "cpus:100;mem:100")
    sorter.client("a", "cpus:10;mem:10")
    sorter.client("b", "cpus:6;mem:6")
    assert sorter.sort() == ["b", "a"]
    # the "a" subtree competes against "b"; inside it, "a" against "a/c"
    sorter.client("a/c", "cpus:5;mem:5")
    assert sorter.sort() == ["b", "a/c", "a"]
    sorter.remove("a")
    assert not sorter.contains("a")
    assert sorter.sort() == ["a/c", "b"]
    sorter.client("a", "cpus:10;mem:10")
    assert sorter.contains("a")
    assert sorter.sort() == ["b", "a/c", "a"]
    # "a" competes against "a/c" with a weight of 1
    sorter.update_weight("a/c", 0.2)
    assert sorter.sort() == ["b", "a", "a/c"]
    # "a"'s weight counts against its siblings, not its children
    sorter.update_weight("a", 3)
    assert sorter.sort() == ["a", "a/c", "b"]
    sorter.update_weight("a/c", 1)
    assert sorter.sort() == ["a/c", "a", "b"]


@pytest.mark.parametrize("policy", NESTED)
def test_sorter_AddChildToInternal(policy: str) -> None:
    sorter = MesosSorter(policy)
    sorter.add_slave(AGENT, "cpus:100;mem:100")
    sorter.client("x/a", "cpus:10;mem:10")
    sorter.client("x/b", "cpus:6;mem:6")
    assert sorter.sort() == ["x/b", "x/a"]
    sorter.client("x", "cpus:7;mem:7")
    assert sorter.sort() == ["x/b", "x", "x/a"]
    sorter.client("z", "cpus:20;mem:20")
    assert sorter.sort() == ["z", "x/b", "x", "x/a"]
    sorter.remove("x")
    assert sorter.sort() == ["x/b", "x/a", "z"]


@pytest.mark.parametrize("policy", NESTED)
def test_sorter_AddChildToInactiveLeaf(policy: str) -> None:
    sorter = MesosSorter(policy)
    sorter.add_slave(AGENT, "cpus:100;mem:100")
    sorter.client("a", "cpus:10;mem:10")
    sorter.client("b", "cpus:6;mem:6")
    sorter.deactivate("a")
    assert sorter.sort() == ["b"]
    sorter.client("a/c", "cpus:5;mem:5")
    assert sorter.sort() == ["b", "a/c"]


def _collapse(policy: str) -> MesosSorter:
    sorter = MesosSorter(policy)
    sorter.add_slave(AGENT, "cpus:100;mem:100")
    for client, held in (("a", "cpus:10;mem:10"), ("b", "cpus:6;mem:6"), ("a/c", "cpus:5;mem:5")):
        sorter.client(client, held)
    return sorter


@pytest.mark.parametrize("policy", NESTED)
def test_sorter_RemoveLeafCollapseParent(policy: str) -> None:
    sorter = _collapse(policy)
    assert sorted(sorter.sort()) == ["a", "a/c", "b"]
    sorter.remove("a/c")
    assert sorted(sorter.sort()) == ["a", "b"]


@pytest.mark.parametrize("policy", NESTED)
def test_sorter_RemoveLeafCollapseParentInactive(policy: str) -> None:
    sorter = _collapse(policy)
    sorter.deactivate("a")
    assert sorted(sorter.sort()) == ["a/c", "b"]
    sorter.remove("a/c")
    assert sorter.sort() == ["b"]


@pytest.mark.parametrize("policy", NESTED)
def test_sorter_ChangeWeightOnSubtree(policy: str) -> None:
    sorter = MesosSorter(policy)
    sorter.add_slave(AGENT, "cpus:100;mem:100")
    sorter.update_weight("b", 3)  # weights of nodes that do not exist yet
    sorter.update_weight("a", 2)
    sorter.add("a/x")
    sorter.add("b/y")
    sorter.activate("a/x")
    sorter.activate("b/y")
    assert sorter.sort() == ["a/x", "b/y"]
    sorter.allocated("a/x", "cpus:10;mem:10")
    sorter.allocated("b/y", "cpus:10;mem:10")
    assert sorter.sort() == ["b/y", "a/x"]
    sorter.client("b/z", "cpus:5;mem:5")
    assert sorter.sort() == ["b/z", "b/y", "a/x"]
    sorter.client("b", "cpus:4;mem:4")
    assert sorter.sort() == ["a/x", "b", "b/z", "b/y"]
    sorter.client("a/zz", "cpus:2;mem:2")
    assert sorter.sort() == ["a/zz", "a/x", "b", "b/z", "b/y"]


@pytest.mark.parametrize("policy", FLAT)
def test_sorter_AllocationForInactiveClient(policy: str) -> None:
    sorter = MesosSorter(policy)
    sorter.add_slave(AGENT, "cpus:10;mem:10")
    sorter.add("a")
    sorter.client("b")
    sorter.allocated("a", "cpus:2;mem:2")  # a is inactive
    sorter.allocated("b", "cpus:3;mem:3")
    assert sorter.allocation("a") == quantities("cpus:2;mem:2")
    assert sorter.allocation("b") == quantities("cpus:3;mem:3")
    assert sorter.sort() == ["b"]


@pytest.mark.parametrize("policy", FLAT)
def test_sorter_MultipleSlaves(policy: str) -> None:
    # Deliberate difference: the agents' port ranges count in the allocation by their
    # size (1,001 ports each), where Mesos's scalar quantities leave them out
    sorter = MesosSorter(policy)
    sorter.client("framework")
    slave = "cpus:2;mem:512;ports:[31000-32000]"
    sorter.add_slave("agentA", slave)
    sorter.add_slave("agentB", slave)
    sorter.allocated("framework", slave)
    sorter.allocated("framework", slave)
    assert sorter.allocation("framework") == quantities("cpus:4;mem:1024;ports:2002")


@pytest.mark.parametrize("policy", FLAT)
def test_sorter_UpdateTotal(policy: str) -> None:
    sorter = MesosSorter(policy)
    sorter.add("a")
    sorter.add("b")
    sorter.activate("a")
    sorter.activate("b")
    sorter.add_slave(AGENT, "cpus:10;mem:100")
    sorter.allocated("a", "cpus:2;mem:1")
    sorter.allocated("b", "cpus:1;mem:2")
    assert sorter.sort() == ["b", "a"]  # a = .2 (cpus), b = .1 (cpus)
    sorter.remove_slave(AGENT)
    sorter.add_slave(AGENT, "cpus:100;mem:10")
    assert sorter.sort() == ["a", "b"]  # a = .1 (mem), b = .2 (mem)


@pytest.mark.parametrize("policy", FLAT)
def test_sorter_MultipleSlavesUpdateTotal(policy: str) -> None:
    sorter = MesosSorter(policy)
    sorter.add("a")
    sorter.add("b")
    sorter.activate("a")
    sorter.activate("b")
    sorter.add_slave("agentA", "cpus:5;mem:50")
    sorter.add_slave("agentB", "cpus:5;mem:50")
    sorter.allocated("a", "cpus:2;mem:1")
    sorter.allocated("b", "cpus:1;mem:3")
    assert sorter.sort() == ["b", "a"]
    sorter.remove_slave("agentA")
    sorter.add_slave("agentA", "cpus:95;mem:50")
    assert sorter.sort() == ["a", "b"]


@pytest.mark.parametrize("policy", FLAT)
def test_sorter_RemoveResources(policy: str) -> None:
    sorter = MesosSorter(policy)
    sorter.add("a")
    sorter.add("b")
    sorter.activate("a")
    sorter.activate("b")
    sorter.add_slave(AGENT, "cpus:10")
    sorter.allocated("a", "cpus:6")
    sorter.allocated("b", "cpus:4")
    assert sorter.sort() == ["b", "a"]
    sorter.remove_slave(AGENT)  # 5 of a's cpus are taken off the agent
    sorter.add_slave(AGENT, "cpus:5")
    sorter.update("a", "cpus:6", "cpus:1")
    assert sorter.sort() == ["a", "b"]


# -- hierarchical_allocator_tests.cpp -------------------------------------------------------

Offers = dict[str, Resources]  # what one framework is offered in one cycle, by agent


class MesosAllocator:
    """Mesos's `HierarchicalAllocatorTest` fixture over our allocator: agents `agentN` and
    frameworks `frameworkN` numbered as Mesos's `createSlaveInfo` / `createFrameworkInfo`
    do; adding either is an event-driven allocation cycle, `advance` a batch one. A cycle
    runs our rounds until nothing more is offered (a slave cut by quota is offered the
    rest in the next round; Mesos offers it in the same cycle) and, as Mesos's offer
    callback, gives each framework one allocation of everything it got, by agent."""

    def __init__(self, policy: str = "drf", quota_headroom: str = "all") -> None:
        self.allocator = Allocator(policy, quota_headroom=quota_headroom)
        self.now = 0.0
        self._agents = 0
        self._frameworks = 0
        self.allocations: deque[tuple[str, Offers]] = deque()

    def add_slave(self, resources: str, used: dict[str, str] | None = None) -> str:
        self._agents += 1
        agent = f"agent{self._agents}"
        self.allocator.add_slave(
            agent,
            quantities(resources),
            used={fw: quantities(r) for fw, r in (used or {}).items()},
        )
        self._cycle()
        return agent

    def add_framework(
        self, role: str, roles: list[str] | None = None, *, shared: bool = False
    ) -> str:
        """Mesos's `createFrameworkInfo({role})`; with `roles`, a MULTI_ROLE framework's
        `createFrameworkInfo(roles)` (its allocations are then by role: `next_roles`);
        `shared`: with the SHARED_RESOURCES capability."""
        self._frameworks += 1
        framework = f"framework{self._frameworks}"
        self.allocator.add_framework(framework, role, roles=roles)
        self.allocator.take_shared(framework, shared)
        self._cycle()
        return framework

    def remove_framework(self, framework: str) -> None:
        self.allocator.remove_framework(framework)

    def update_quota(self, role: str, resources: str) -> None:
        """Mesos's test helper `createQuota(resources)`: guarantee and limit alike."""
        self.allocator.roles.set_quota(
            role, Quota(quantities(resources), limit=Limit.parse(resources))
        )

    def update_weight(self, role: str, weight: float) -> None:
        self.allocator.roles.set_weight(role, weight)

    def recover(
        self,
        framework: str,
        agent: str,
        resources: Resources,
        refuse: float | None = None,
        role: str | None = None,
    ) -> None:
        """`role`: Mesos's `allocatedResources(resources, role)` (a multi-role framework's)."""
        self.allocator.recover(
            framework, agent, resources, role=role, refuse_seconds=refuse, now=self.now
        )

    def update_allocation(self, framework: str, agent: str, consumed: str, converted: str) -> None:
        """Mesos's `updateAllocation` with one conversion (RESERVE, UNRESERVE, CREATE)."""
        self.allocator.update_allocation(framework, agent, R(consumed), R(converted))

    def update_available(self, agent: str, consumed: str, converted: str) -> None:
        """Mesos's `updateAvailable` (an operator's RESERVE on unallocated resources)."""
        self.allocator.update_available(agent, R(consumed), R(converted))
        self._cycle()

    def update_slave(self, agent: str, total: str) -> None:
        """Mesos's `updateSlave(agent, info, total)`: an event-driven cycle after it."""
        self.allocator.update_slave(agent, quantities(total))
        self._cycle()

    def update_slave_attributes(self, agent: str) -> None:
        """Mesos's `updateSlave` with other attributes: what our master asks of the
        allocator when a slave re-registers with other attributes."""
        self.allocator.remove_filters(agent)
        self._cycle()

    def advance(self, seconds: float = 1.0) -> None:
        """Mesos's `Clock::advance(allocation_interval)`: a batch allocation."""
        self.now += seconds
        self._cycle()

    def next(self) -> tuple[str, Offers]:
        assert self.allocations, "no allocation"
        return self.allocations.popleft()

    def next_roles(self) -> tuple[str, dict[str, Offers]]:
        """Mesos's `Allocation(framework, {role: {agent: resources}})`: the next
        allocation, by role (a multi-role framework's offers each name their role)."""
        framework, offers = self.next()
        by_role: dict[str, Offers] = {}
        for key, resources in offers.items():
            role, _, agent = key.rpartition(" ")
            by_role.setdefault(role, {})[agent] = resources
        return framework, by_role

    def pending(self) -> bool:
        return not self.allocations

    def _cycle(self) -> None:
        got: dict[str, Offers] = {}
        while offers := self.allocator.allocate(self.now):
            for a in offers:
                mine = got.setdefault(a.framework_id, {})
                key = a.slave_id if a.role is None else f"{a.role} {a.slave_id}"
                mine[key] = mine.get(key, Resources()) + a.resources
        self.allocations.extend(got.items())


def R(text: str) -> Resources:
    return quantities(text)


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_UnreservedDRF(policy: str) -> None:
    m = MesosAllocator(policy)
    slave1 = m.add_slave("cpus:2;mem:1024;disk:0")
    framework1 = m.add_framework("role1")
    assert m.next() == (framework1, {slave1: R("cpus:2;mem:1024")})
    framework2 = m.add_framework("role2")
    slave2 = m.add_slave("cpus:1;mem:512;disk:0")
    assert m.next() == (framework2, {slave2: R("cpus:1;mem:512")})  # role2: lowest share
    slave3 = m.add_slave("cpus:3;mem:2048;disk:0")
    assert m.next() == (framework2, {slave3: R("cpus:3;mem:2048")})
    framework3 = m.add_framework("role1")
    slave4 = m.add_slave("cpus:4;mem:4096;disk:0")
    # role1 is lowest (.2 against .4), and framework3 lowest in it
    assert m.next() == (framework3, {slave4: R("cpus:4;mem:4096")})
    m.add_framework("role1")  # framework4, with nothing
    slave5 = m.add_slave("cpus:1;mem:512;disk:0")
    # role2 (.36) is below role1 (.63), though framework4 holds nothing
    assert m.next() == (framework2, {slave5: R("cpus:1;mem:512")})
    assert m.pending()


@pytest.mark.parametrize("policy", NESTED)
def test_allocator_NestedRoleDRF(policy: str) -> None:
    m = MesosAllocator(policy)
    slave1 = m.add_slave("cpus:2;mem:1024;disk:0")
    framework1 = m.add_framework("a/b")
    assert m.next() == (framework1, {slave1: R("cpus:2;mem:1024")})
    m.add_framework("a/c")
    framework3 = m.add_framework("d/e")
    # the "a" subtree holds more than the "d" subtree: "d/e", not "a/c"
    slave2 = m.add_slave("cpus:1;mem:512;disk:0")
    assert m.next() == (framework3, {slave2: R("cpus:1;mem:512")})
    framework4 = m.add_framework("d/f")
    slave3 = m.add_slave("cpus:2;mem:1024;disk:0")
    assert m.next() == (framework4, {slave3: R("cpus:2;mem:1024")})
    assert m.pending()


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_CoarseGrained(policy: str) -> None:
    m = MesosAllocator(policy)
    slave1 = m.add_slave("cpus:2;mem:1024;disk:0")
    slave2 = m.add_slave("cpus:2;mem:1024;disk:0")
    framework1 = m.add_framework("role1")
    whole = R("cpus:2;mem:1024")
    assert m.next() == (framework1, {slave1: whole, slave2: whole})
    m.recover(framework1, slave1, whole)
    m.recover(framework1, slave2, whole)
    framework2 = m.add_framework("role2")
    # each framework is offered one whole agent
    got = dict([m.next(), m.next()])
    assert sorted(got) == [framework1, framework2]
    assert all(len(offers) == 1 and sum(offers.values(), Resources()) == whole
               for offers in got.values())  # fmt: skip
    assert m.pending()


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_SameShareFairness(policy: str) -> None:
    m = MesosAllocator(policy)
    framework1 = m.add_framework("*")
    framework2 = m.add_framework("*")
    slave = m.add_slave("cpus:2;mem:1024;disk:0")
    counts = {framework1: 0, framework2: 0}
    for _ in range(10):  # the agent goes to each framework in turn
        framework, offers = m.next()
        assert offers == {slave: R("cpus:2;mem:1024")}
        counts[framework] += 1
        m.recover(framework, slave, offers[slave])
        m.advance()
    assert counts == {framework1: 5, framework2: 5}


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_QuotaProvidesGuarantee(policy: str) -> None:
    m = MesosAllocator(policy)
    framework1 = m.add_framework("quota-role")
    m.update_quota("quota-role", "cpus:2;mem:1024")
    m.add_framework("no-quota-role")
    agent1 = m.add_slave("cpus:1;mem:512;disk:0")
    assert m.next() == (framework1, {agent1: R("cpus:1;mem:512")})
    agent2 = m.add_slave("cpus:1;mem:512;disk:0")
    assert m.next() == (framework1, {agent2: R("cpus:1;mem:512")})
    # framework1 declines agent2 for two allocation intervals: the declined resources
    # are not offered to framework2, as framework1's guarantee may need them
    m.recover(framework1, agent2, R("cpus:1;mem:512"), refuse=2.0)
    m.advance()
    assert m.pending()
    m.advance()
    assert m.next() == (framework1, {agent2: R("cpus:1;mem:512")})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_QuotaProvidesLimit(policy: str) -> None:
    m = MesosAllocator(policy)
    framework1 = m.add_framework("*")
    m.allocator.roles.set_quota("*", Quota(Resources(), limit=Limit.parse("cpus:0;mem:0;disk:0")))
    agent1 = m.add_slave("cpus:2;mem:1024;disk:1024")
    assert m.pending()  # a zero limit: nothing for "*"
    framework2 = m.add_framework("no-quota-role")
    assert m.next() == (framework2, {agent1: R("cpus:2;mem:1024;disk:1024")})
    m.allocator.roles.set_quota(
        "*", Quota(Resources(), limit=Limit.parse("cpus:1;mem:512;disk:512"))
    )
    agent2 = m.add_slave("cpus:2;mem:1024;disk:1024")
    # half of agent2 to framework1, under its limit; the rest to framework2
    half = R("cpus:1;mem:512;disk:512")
    assert dict([m.next(), m.next()]) == {framework1: {agent2: half}, framework2: {agent2: half}}


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_RemoveQuota(policy: str) -> None:
    m = MesosAllocator(policy)
    m.update_quota("quota-role", "cpus:2;mem:1024")
    framework1 = m.add_framework("quota-role")
    framework2 = m.add_framework("no-quota-role")
    agent1 = m.add_slave("cpus:1;mem:512;disk:0", used={framework1: "cpus:1;mem:512"})
    m.add_slave("cpus:1;mem:512;disk:0", used={framework1: "cpus:1;mem:512"})
    assert m.pending()
    m.allocator.roles.remove_quota("quota-role")
    m.recover(framework1, agent1, R("cpus:1;mem:512"))
    m.advance()
    assert m.next() == (framework2, {agent1: R("cpus:1;mem:512")})  # fairness again


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_MultipleFrameworksInRoleWithQuota(policy: str) -> None:
    m = MesosAllocator(policy)
    framework1a = m.add_framework("quota-role")
    m.update_quota("quota-role", "cpus:4;mem:2048")
    m.add_framework("no-quota-role")
    agent1 = m.add_slave("cpus:1;mem:512;disk:0")
    assert m.next() == (framework1a, {agent1: R("cpus:1;mem:512")})
    framework1b = m.add_framework("quota-role")
    agent2 = m.add_slave("cpus:2;mem:1024;disk:0")
    assert m.next() == (framework1b, {agent2: R("cpus:2;mem:1024")})  # coarse-grained
    agent3 = m.add_slave("cpus:1;mem:512;disk:0")
    assert m.next() == (framework1a, {agent3: R("cpus:1;mem:512")})  # lower share
    m.recover(framework1a, agent3, R("cpus:1;mem:512"), refuse=5.0)
    m.advance()
    assert m.next() == (framework1b, {agent3: R("cpus:1;mem:512")})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_QuotaAllocationGranularity(policy: str) -> None:
    m = MesosAllocator(policy)
    framework1 = m.add_framework("quota-role")
    m.update_quota("quota-role", "cpus:0.5;mem:200")
    agent = m.add_slave("cpus:1;mem:512;disk:0")
    assert m.next() == (framework1, {agent: R("cpus:0.5;mem:200")})  # just its quota
    framework2 = m.add_framework("no-quota-role")
    assert m.next() == (framework2, {agent: R("cpus:0.5;mem:312")})  # the rest


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_QuotaRoleAllocateNonQuotaResource(policy: str) -> None:
    # the agents' port ranges counted by their size (ports:1001)
    m = MesosAllocator(policy)
    m.update_quota("quota-role-1", "cpus:2")
    agent1 = m.add_slave("cpus:1;mem:1024;ports:[31000-32000]")
    framework = m.add_framework("quota-role-1")
    # memory and ports too: quota-role-1 has no limit on them, and nobody needs them set
    # aside
    assert m.next() == (framework, {agent1: R("cpus:1;mem:1024;ports:[31000-32000]")})
    m.update_quota("quota-role-2", "mem:1024")  # no framework
    agent2 = m.add_slave("cpus:1;mem:1024;ports:[31000-32000]")
    # the cpu it still lacks and the ports, but not the memory: quota-role-2's headroom
    assert m.next() == (framework, {agent2: R("cpus:1;ports:[31000-32000]")})
    agent3 = m.add_slave("cpus:1;mem:1024;ports:[31000-32000]")
    # its cpus limit is reached: only what it has no quota for
    assert m.next() == (framework, {agent3: R("mem:1024;ports:[31000-32000]")})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_DRFWithQuota(policy: str) -> None:
    m = MesosAllocator(policy)
    m.update_quota("quota-role", "cpus:0.25;mem:128")
    framework1 = m.add_framework("quota-role")
    framework2 = m.add_framework("no-quota-role")
    agent1 = m.add_slave("cpus:1;mem:512;disk:0", used={framework1: "cpus:0.25;mem:128"})
    # every quota is met: the rest goes by fair share
    assert m.next() == (framework2, {agent1: R("cpus:0.75;mem:384")})
    agent2 = m.add_slave("cpus:1;mem:512;disk:0")
    # not framework1's, though it holds less: its role's quota is met
    assert m.next() == (framework2, {agent2: R("cpus:1;mem:512")})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_QuotaAgainstStarvation(policy: str) -> None:
    m = MesosAllocator(policy)
    framework1 = m.add_framework("quota-role")
    framework2 = m.add_framework("no-quota-role")
    m.add_slave("cpus:1;mem:512;disk:0", used={framework1: "cpus:1;mem:512"})
    agent2 = m.add_slave("cpus:1;mem:512;disk:0")
    whole = R("cpus:1;mem:512")
    assert m.next() == (framework2, {agent2: whole})
    m.recover(framework2, agent2, whole, refuse=0.0)  # declined, no filter
    m.advance()
    assert m.next() == (framework2, {agent2: whole})  # back to the lowest share
    m.recover(framework2, agent2, whole, refuse=0.0)
    m.update_quota("quota-role", "cpus:2;mem:1024")  # the starving role gets quota
    m.advance()
    assert m.next() == (framework1, {agent2: whole})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_QuotaAbsentFrameworkWholeAgent(policy: str) -> None:
    m = MesosAllocator(policy)
    m.update_quota("quota-role", "cpus:2;mem:1024")  # no framework in it
    framework = m.add_framework("no-quota-role")
    m.add_slave("cpus:2;mem:1024")
    assert m.pending()  # all of agent1 is set aside for quota-role's guarantee
    m.add_slave("cpus:2;mem:1024")
    got, offers = m.next()  # one of the two agents; the other stays set aside
    assert got == framework
    assert list(offers.values()) == [R("cpus:2;mem:1024")]
    assert m.pending()


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_QuotaAbsentFrameworkWholeAgent_demand(policy: str) -> None:
    # deliberate: with `--quota-headroom demand` nothing is set aside for a role without
    # frameworks (work-conserving; preemption reclaims its guarantee when it comes)
    m = MesosAllocator(policy, quota_headroom="demand")
    m.update_quota("quota-role", "cpus:2;mem:1024")
    framework = m.add_framework("no-quota-role")
    agent1 = m.add_slave("cpus:2;mem:1024")
    assert m.next() == (framework, {agent1: R("cpus:2;mem:1024")})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_MultiQuotaAbsentFrameworks(policy: str) -> None:
    m = MesosAllocator(policy)
    agent = m.add_slave("cpus:2;mem:2048;disk:0")
    m.update_quota("quota-role-1", "cpus:1;mem:1024")
    m.update_quota("quota-role-2", "cpus:2;mem:2048")
    framework = m.add_framework("quota-role-2")
    # a quota role without frameworks does not keep another from its guarantee
    assert m.next() == (framework, {agent: R("cpus:2;mem:2048")})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_MultiQuotaWithFrameworks(policy: str) -> None:
    m = MesosAllocator(policy)
    m.update_quota("quota-role-1", "cpus:1;mem:200")
    m.update_quota("quota-role-2", "cpus:2;mem:2000")
    framework1 = m.add_framework("quota-role-1")
    framework2 = m.add_framework("quota-role-2")
    m.add_slave("cpus:1;mem:1024;disk:0", used={framework1: "cpus:1;mem:1024"})
    m.add_slave("cpus:1;mem:1024;disk:0", used={framework2: "cpus:1;mem:1024"})
    agent3 = m.add_slave("cpus:2;mem:2048")
    # quota-role-1 is met; quota-role-2 gets what its quota still lacks
    assert m.next() == (framework2, {agent3: R("cpus:1;mem:976")})
    assert m.pending()


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_DominantShareMetrics(policy: str) -> None:
    m = MesosAllocator(policy)

    def share(role: str) -> float:  # Mesos's allocator/mesos/roles/<role>/shares/dominant
        return dominant_share(m.allocator.roles.held(role), m.allocator.total.millis)

    agent1 = m.add_slave("cpus:1;mem:1024")
    m.add_framework("roleA")
    assert share("roleA") == 1
    framework, offers = m.next()
    m.recover(framework, agent1, offers[agent1])
    assert share("roleA") == 0
    # a new role wins the 0-0 tie against roleA, which was allocated to once already
    m.add_framework("roleB")
    assert (share("roleA"), share("roleB")) == (0, 1)
    m.add_slave("cpus:1;mem:1024")  # to roleA, the lowest: shares equal
    assert (share("roleA"), share("roleB")) == (0.5, 0.5)
    m.remove_framework("framework2")
    assert share("roleA") == 0.5


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_UpdateWeight(policy: str) -> None:
    single = R("cpus:2;mem:1024")
    m = MesosAllocator(policy)
    for _ in range(6):
        m.add_slave("cpus:2;mem:1024")
    framework1 = m.add_framework("role1")
    framework2 = m.add_framework("role2")

    def cycle(count: int, recover: bool) -> dict[str, Resources]:
        got = {}
        for _ in range(count):
            framework, offers = m.next()
            got[framework] = sum(offers.values(), Resources())
            if recover:
                for agent, resources in offers.items():
                    m.recover(framework, agent, resources)
        assert m.pending()
        return got

    cycle(1, recover=True)  # framework1 got everything; given back
    m.advance()
    assert cycle(2, recover=True) == {framework1: single.scaled(3), framework2: single.scaled(3)}
    m.update_weight("role2", 2.0)
    m.advance()
    assert cycle(2, recover=True) == {framework1: single.scaled(2), framework2: single.scaled(4)}
    m.update_weight("role3", 3.0)
    framework3 = m.add_framework("role3")
    assert cycle(3, recover=False) == {
        framework1: single,
        framework2: single.scaled(2),
        framework3: single.scaled(3),
    }


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_DisproportionateQuotaVsAllocation(policy: str) -> None:
    m = MesosAllocator(policy)
    m.update_quota("quota-role", "cpus:4;mem:1024")
    framework = m.add_framework("quota-role")
    agent1 = m.add_slave("cpus:2;mem:1024")
    assert m.next() == (framework, {agent1: R("cpus:2;mem:1024")})
    agent2 = m.add_slave("cpus:2;mem:1024")
    # its memory limit is reached: the cpus it still lacks, without memory
    assert m.next() == (framework, {agent2: R("cpus:2")})


@pytest.mark.parametrize("policy", NESTED)
def test_allocator_QuotaWithNestedRoleAllocation(policy: str) -> None:
    m = MesosAllocator(policy)
    framework1 = m.add_framework("a/b")
    agent1 = m.add_slave("cpus:1;mem:1024")
    assert m.next() == (framework1, {agent1: R("cpus:1;mem:1024")})
    m.update_quota("a", "cpus:1;mem:1024")
    m.add_framework("a")
    m.add_slave("cpus:1;mem:1024")
    # Deliberate difference: Mesos offers agent2 to framework1 in "a/b", as its sub-roles
    # are not bound by "a"'s limit (its own TODO says no allocation should be made once
    # hierarchical quota is done). Here a limit caps its whole subtree: "a" is at its
    # limit, so nothing under it is offered anything.
    assert m.pending()


@pytest.mark.parametrize("policy", NESTED)
def test_allocator_QuotaHeadroomWithNestedRoleAllocation(policy: str) -> None:
    m = MesosAllocator(policy)
    framework1 = m.add_framework("a/b")
    agent1 = m.add_slave("cpus:1;mem:100")
    assert m.next() == (framework1, {agent1: R("cpus:1;mem:100")})
    framework2 = m.add_framework("a")
    agent2 = m.add_slave("cpus:1;mem:100")
    assert m.next() == (framework2, {agent2: R("cpus:1;mem:100")})
    m.update_quota("quota-role", "cpus:1;mem:100")  # no framework
    m.add_slave("cpus:1;mem:100")
    assert m.pending()  # held back for quota-role
    m.add_slave("cpus:1;mem:100")
    m.next()  # one of the two goes to "a" or "a/b"; the other stays held back
    assert m.pending()


# -- the sorter's tests of volumes, on the allocator's books ---------------------------------
# Mesos's sorter keeps each client's allocation per agent, volumes and all, and strips
# them for shares; ours is given quantities by the allocator (master.allocation.reserved),
# which keeps the per-slave books. These drive the allocator and read both.


def volume_allocator(
    policy: str, agents: dict[str, str], used: dict[str, dict[str, str]]
) -> Allocator:
    a = Allocator(policy)
    for agent, total in agents.items():
        a.add_slave(agent, R(total))
    for client in sorted({c for by in used.values() for c in by}):
        a.add_framework(client, client)
    for agent, by in used.items():
        for client, held in by.items():
            a.allocate_existing(client, agent, R(held))
    return a


@pytest.mark.parametrize("policy", FLAT)
def test_sorter_SplitResourceShares(policy: str) -> None:
    # b's two 5-disk volumes of one id are 10 disk in its share, as Mesos counts them
    a = volume_allocator(
        policy,
        {"agent": "cpus:100;mem:100;disk:90;disk[ID2:data]:10"},
        {"agent": {"a": "cpus:9;mem:9;disk:9", "b": "cpus:9;mem:9;disk[ID2:data]:10"}},
    )
    assert list(a.order()) == ["a", "b"]


@pytest.mark.parametrize("policy", FLAT)
def test_sorter_UpdateAllocation(policy: str) -> None:
    whole = "cpus:10;mem:10;disk:10"
    a = volume_allocator(policy, {"agent": whole, "agent2": whole}, {"agent": {"a": whole}})
    new = R("cpus:10;mem:10;disk:5;disk[ID:data]:5")
    a.update_allocation("a", "agent", R(whole), new)
    assert a.held("a", "agent") == new
    assert a.allocation("a") == R(whole)  # its quantities: the share is unchanged
    assert a.allocated_total().quantities() == R(whole)
    a.add_framework("c", "c")
    a.allocate_existing("c", "agent2", R(whole))
    a.update_allocation("c", "agent2", R(whole), Resources())
    assert a.held("c", "agent2") == Resources()


@pytest.mark.parametrize("policy", NESTED)
def test_sorter_UpdateAllocationNestedClient(policy: str) -> None:
    whole = "cpus:10;mem:10;disk:10"
    a = volume_allocator(policy, {"agent": whole}, {"agent": {"a/x": whole}})
    a.add_framework("b/y", "b/y")
    new = R("cpus:10;mem:10;disk:5;disk[ID:data]:5")
    a.update_allocation("a/x", "agent", R(whole), new)
    assert a.held("a/x", "agent") == new
    assert a.allocation("a/x") == R(whole)
    assert a.roles.held("a") == R(whole).millis


@pytest.mark.parametrize("policy", FLAT)
def test_sorter_MultipleSlavesUpdateAllocation(policy: str) -> None:
    # (without the agents' port ranges: ports are not a resource of ours)
    each = "cpus:2;mem:512;disk:10"
    a = volume_allocator(
        policy, {"agentA": each, "agentB": each},
        {"agentA": {"framework": each}, "agentB": {"framework": each}},
    )  # fmt: skip
    new = R("cpus:2;mem:512;disk:5;disk[ID:data]:5")
    for agent in ("agentA", "agentB"):
        a.update_allocation("framework", agent, R(each), new)
        assert a.held("framework", agent) == new
    assert a.allocation("framework") == R(each) + R(each)
    assert a.allocated_total().quantities() == R(each) + R(each)


# -- shared persistent volumes (sorter_tests.cpp, hierarchical_allocator_tests.cpp) ----------
# A shared volume (Mesos's `Resource.shared`) is allocated in copies, one a task; a
# framework's share and its role's count it once however many copies they hold
# (master.allocation.shared). Mesos's sorter tests give the sorter copies directly;
# ours go through the allocator's books, which count them (as SplitResourceShares).

SHARED = "disk(role1)[id1:path1]<SHARED>"


def shared_disk(size: int, copies: int = 1) -> str:
    return f"{SHARED}:{size * copies}"


def shared_order(policy: str, total: str, held: list[tuple[str, str]]) -> Allocator:
    """An allocator with one agent of `total`, and clients (each its own role, as the
    sorter's) holding what `held` says, in that order."""
    a = Allocator(policy)
    a.add_slave("agentId", R(total))
    for client, resources in held:
        if client not in a.frameworks:
            a.add_framework(client, client)
        a.allocate_existing(client, "agentId", R(resources))
    return a


@pytest.mark.parametrize("policy", FLAT)
def test_sorter_SharedResources(policy: str) -> None:
    total = f"cpus:100;mem:100;disk(role1):900;{shared_disk(100)}"
    a = shared_order(
        policy, total, [("a", f"cpus:5;mem:5;{shared_disk(100)}"), ("b", "cpus:6;mem:6")]
    )
    assert list(a.order()) == ["b", "a"]  # a = .1 (disk), b = .06 (cpus)
    a.add_framework("c", "c")
    a.allocate_existing("c", "agentId", R(f"cpus:1;mem:1;{shared_disk(100)}"))
    assert list(a.order()) == ["b", "a", "c"]  # a and c share the volume: .1 each
    # the agent's free resources count it once, allocated
    assert a.free("agentId") == R("cpus:88;mem:88;disk(role1):900")
    a.remove_framework("a")
    a.recover("b", "agentId", R("cpus:4;mem:4"))
    assert list(a.order()) == ["b", "c"]  # b = .02, c = .1
    a.add_framework("d", "d")
    a.allocate_existing("d", "agentId", R(f"cpus:1;mem:5;{shared_disk(100)}"))
    assert list(a.order()) == ["b", "c", "d"]
    assert sorted(a.frameworks) == ["b", "c", "d"]
    # the volume is allocated once on the agent, however many hold it
    assert a.held_on("agentId")[SHARED] == 100


@pytest.mark.parametrize("policy", FLAT)
def test_sorter_SameDominantSharedResourcesAcrossClients(policy: str) -> None:
    total = f"cpus:100;mem:100;disk(role1):100;{shared_disk(900)}"
    a = shared_order(
        policy, total,
        [("b", f"cpus:5;mem:20;{shared_disk(900)}"), ("c", f"cpus:10;mem:6;{shared_disk(900)}")],
    )  # fmt: skip
    assert list(a.order()) == ["b", "c"]  # .9 each (disk)
    a.add_framework("a", "a")
    a.allocate_existing("a", "agentId", R(f"cpus:50;mem:40;{shared_disk(900)}"))
    assert list(a.order()) == ["a", "b", "c"]  # .9 each: the shared volume dominates
    assert a.free("agentId") == R("cpus:35;mem:34;disk(role1):100")


@pytest.mark.parametrize("policy", FLAT)
def test_sorter_SameSharedResourcesSameClient(policy: str) -> None:
    total = f"cpus:100;mem:100;disk(role1):950;{shared_disk(50)}"
    a = shared_order(
        policy, total, [("a", f"cpus:2;mem:2;{shared_disk(50)}"), ("b", "cpus:6;mem:6")]
    )
    assert list(a.order()) == ["a", "b"]  # a = .05 (disk), b = .06 (cpus)
    a.allocate_existing("a", "agentId", R(shared_disk(50, copies=3)))
    assert list(a.order()) == ["a", "b"]  # three copies more: the same share
    assert a.allocation("a") == R("cpus:2;mem:2;disk:50")
    assert a.held("a", "agentId")[SHARED] == 200  # (its four copies)


@pytest.mark.parametrize("policy", FLAT)
def test_sorter_SharedResourcesUnallocated(policy: str) -> None:
    total = f"cpus:100;mem:100;disk(role1):900;{shared_disk(100)}"
    a = shared_order(
        policy, total, [("a", f"cpus:2;mem:2;{shared_disk(100, 3)}"), ("b", "cpus:6;mem:6")]
    )
    assert list(a.order()) == ["b", "a"]  # a = .1 (disk), b = .06
    a.recover("a", "agentId", R(shared_disk(100)))
    assert list(a.order()) == ["b", "a"]  # one copy back: two still held
    assert a.allocation("a") == R("cpus:2;mem:2;disk:100")  # counted once
    a.recover("a", "agentId", R(shared_disk(100, 2)))
    assert list(a.order()) == ["a", "b"]  # a = .02 (cpus)
    assert a.free("agentId")[SHARED] == 100


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_UpdateAllocationSharedPersistentVolume(policy: str) -> None:
    m = MesosAllocator(policy)
    whole = "cpus:100;mem:100;disk(role1):100"
    agent = m.add_slave(whole)
    framework = m.add_framework("role1", shared=True)
    assert m.next() == (framework, {agent: R(whole)})
    m.update_allocation(framework, agent, "disk(role1):5", shared_disk(5))  # CREATE
    updated = R(f"cpus:100;mem:100;disk(role1):95;{shared_disk(5)}")
    m.recover(framework, agent, updated)
    m.advance()
    assert m.next() == (framework, {agent: updated})
    m.update_allocation(framework, agent, shared_disk(5), "disk(role1):5")  # DESTROY
    m.recover(framework, agent, R(whole))
    m.advance()
    assert m.next() == (framework, {agent: R(whole)})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_SharedResourcesCapability(policy: str) -> None:
    m = MesosAllocator(policy)
    whole = "cpus:100;mem:100;disk(role1):100"
    agent = m.add_slave(whole)
    framework1 = m.add_framework("role1")  # without SHARED_RESOURCES
    assert m.next() == (framework1, {agent: R(whole)})
    m.update_allocation(framework1, agent, "disk(role1):5", shared_disk(5))
    updated = R(f"cpus:100;mem:100;disk(role1):95;{shared_disk(5)}")
    m.recover(framework1, agent, updated)
    m.advance()
    # not offered the shared volume: it did not opt in
    assert m.next() == (framework1, {agent: updated - R(shared_disk(5))})
    m.recover(framework1, agent, updated - R(shared_disk(5)))
    framework2 = m.add_framework("role1", shared=True)
    assert m.next() == (framework2, {agent: updated})


@pytest.mark.parametrize("quota", [False, True])
@pytest.mark.parametrize("policy", FLAT)
def test_allocator_AllocateSharedResources(policy: str, quota: bool) -> None:
    m = MesosAllocator(policy)
    framework1 = m.add_framework("role1", shared=True)
    framework2 = m.add_framework("role1", shared=True)
    if quota:
        m.update_quota("role1", "cpus:8;mem:2048;disk:4096")
    whole = "cpus:4;mem:1024;disk(role1):2048"
    agent = m.add_slave(whole)
    assert m.next() == (framework1, {agent: R(whole)})
    m.update_allocation(framework1, agent, "disk(role1):5", shared_disk(5))  # CREATE
    task = R(f"cpus:1;mem:5;{shared_disk(5)}")  # a task launched on the shared volume
    updated = R(f"cpus:4;mem:1024;disk(role1):2043;{shared_disk(5)}")
    m.recover(framework1, agent, updated - task)
    m.advance()
    # the volume is offered again while its task uses it (it is shared)
    assert m.next() == (framework2, {agent: updated - task + R(shared_disk(5))})


@pytest.mark.parametrize("kind", ["STATIC", "DYNAMIC"])
@pytest.mark.parametrize("policy", FLAT)
def test_allocator_SharedAllocatedResourceQuotaAccounting(policy: str, kind: str) -> None:
    m = MesosAllocator(policy)
    m.update_quota("quota-role", "cpus:3;mem:2048;disk:100")
    mine = reserved("cpus:2;mem:1024;disk:50", "quota-role", kind)
    agent1 = m.add_slave(mine)
    framework = m.add_framework("quota-role", shared=True)
    assert m.next() == (framework, {agent1: R(mine)})
    disk = reserved("disk:50", "quota-role", kind)
    volume = f"{disk.rpartition(':')[0]}[id1:path1]<SHARED>:50"
    m.update_allocation(framework, agent1, disk, volume)  # CREATE
    back = R(reserved("cpus:1;mem:512", "quota-role", kind))
    m.recover(framework, agent1, back)
    m.advance()
    # the rest of agent1, and the shared volume a second time
    assert m.next() == (framework, {agent1: back + R(volume)})
    # its role holds cpus:2;mem:1024;disk:50: the volume counts once, held twice
    agent2 = m.add_slave("cpus:1;mem:1024;disk:50")
    assert m.next() == (framework, {agent2: R("cpus:1;mem:1024;disk:50")})
    m.add_slave("cpus:0.5;mem:512;disk:50")
    assert m.pending()  # its quota's limit is met


# -- reservations (hierarchical_allocator_tests.cpp) ------------------------------------------
# Mesos runs the quota-and-reservation tests once with a STATIC and once with a DYNAMIC
# reservation (HierarchicalAllocatorTestWithReservations): `RESERVED` gives both spellings.
RESERVED = {"STATIC": "({role})", "DYNAMIC": "({role},principal)"}


def reserved(text: str, role: str, kind: str = "STATIC") -> str:
    """`cpus:1;mem:1024` reserved for `role` (Mesos's `pushReservation`)."""
    mark = RESERVED[kind].format(role=role)
    return ";".join(f"{n}{mark}:{a}" for n, _, a in (p.partition(":") for p in text.split(";")))


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_ReservedDRF(policy: str) -> None:
    m = MesosAllocator(policy)
    slave1 = m.add_slave("cpus:1;mem:512;disk:0;cpus(role1):100;mem(role1):1024;disk(role1):0")
    framework1 = m.add_framework("role1")
    assert m.next() == (framework1, {slave1: R("cpus:1;mem:512;cpus(role1):100;mem(role1):1024")})
    framework2 = m.add_framework("role2")
    slave2 = m.add_slave("cpus:2;mem:512;disk:0")
    assert m.next() == (framework2, {slave2: R("cpus:2;mem:512")})
    # framework1 holds more than framework2 (its reservation counts in its share)
    slave3 = m.add_slave("cpus:2;mem:512;disk:0")
    assert m.next() == (framework2, {slave3: R("cpus:2;mem:512")})
    # a new framework in role1: the role's reserved resources are shared fairly within it
    framework3 = m.add_framework("role1")
    slave4 = m.add_slave("cpus(role1):2;mem(role1):1024;disk(role1):0")
    assert m.next() == (framework3, {slave4: R("cpus(role1):2;mem(role1):1024")})
    assert m.pending()


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_Reservations(policy: str) -> None:
    m = MesosAllocator(policy)
    slave1 = m.add_slave("cpus(role1):2;mem(role1):1024;disk(role1):0")
    slave2 = m.add_slave("cpus(role2):2;mem(role2):1024;cpus:1;mem:1024;disk:0")
    m.add_slave("cpus(role3):1;mem(role3):1024;disk(role3):0")  # nobody in role3: never
    framework1 = m.add_framework("role1")
    assert m.next() == (
        framework1,
        {slave1: R("cpus(role1):2;mem(role1):1024"), slave2: R("cpus:1;mem:1024")},
    )
    framework2 = m.add_framework("role2")
    assert m.next() == (framework2, {slave2: R("cpus(role2):2;mem(role2):1024")})
    assert m.pending()


@pytest.mark.parametrize("kind", ["STATIC", "DYNAMIC"])
@pytest.mark.parametrize("policy", FLAT)
def test_allocator_ReservationUnallocated(policy: str, kind: str) -> None:
    m = MesosAllocator(policy)
    mine = reserved("cpus:1;mem:1024", "quota-role", kind)
    agent1 = m.add_slave(mine)
    m.update_quota("quota-role", "cpus:1;mem:1024")
    framework1 = m.add_framework("quota-role")
    assert m.next() == (framework1, {agent1: R(mine)})
    m.recover(framework1, agent1, R(mine), refuse=86400)  # declined for a day
    m.add_slave("cpus:1;mem:1024")
    # its idle reservation counts towards its quota: another agent would pass the limit
    assert m.pending()


@pytest.mark.parametrize("kind", ["STATIC", "DYNAMIC"])
@pytest.mark.parametrize("policy", FLAT)
def test_allocator_ReservationAllocated(policy: str, kind: str) -> None:
    m = MesosAllocator(policy)
    mine = reserved("cpus:1;mem:1024", "quota-role", kind)
    agent1 = m.add_slave(mine)
    m.update_quota("quota-role", "cpus:2;mem:2048")
    framework1 = m.add_framework("quota-role")
    assert m.next() == (framework1, {agent1: R(mine)})
    agent2 = m.add_slave("cpus:1;mem:1024")
    assert m.next() == (framework1, {agent2: R("cpus:1;mem:1024")})
    m.add_slave("cpus:1;mem:1024")
    assert m.pending()  # its quota is met, half of it by its allocated reservation


@pytest.mark.parametrize("kind", ["STATIC", "DYNAMIC"])
@pytest.mark.parametrize("policy", FLAT)
def test_allocator_NonQuotaRoleReservationWithQuotaRole(policy: str, kind: str) -> None:
    m = MesosAllocator(policy)
    theirs = reserved("cpus:2;mem:2048", "non-quota-role", kind)
    agent1 = m.add_slave(f"cpus:2;mem:2048;{theirs}")
    m.update_quota("quota-role", "cpus:2;mem:2048")
    framework1 = m.add_framework("quota-role")
    assert m.next() == (framework1, {agent1: R("cpus:2;mem:2048")})
    m.recover(framework1, agent1, R("cpus:2;mem:2048"), refuse=86400)
    framework2 = m.add_framework("non-quota-role")
    # its reservation is its own, whatever the quota role's headroom holds back
    assert m.next() == (framework2, {agent1: R(theirs)})
    assert m.pending()


@pytest.mark.parametrize("kind", ["STATIC", "DYNAMIC"])
@pytest.mark.parametrize("policy", FLAT)
def test_allocator_QuotaHeadroomWhenReservationsExceedQuota(policy: str, kind: str) -> None:
    m = MesosAllocator(policy)
    m.update_quota("quota-role-w-reservation", "cpus:1;mem:1024")
    m.update_quota("quota-role-no-reservation", "cpus:1;mem:1024")
    m.add_slave(reserved("cpus:2;mem:2048", "quota-role-w-reservation", kind))
    m.add_slave("cpus:1;mem:1024")
    framework = m.add_framework("non-quota-role")
    # the role with reservations past its quota needs no headroom; the other does
    assert m.pending()
    agent3 = m.add_slave("cpus:1;mem:1024")
    assert m.next() == (framework, {agent3: R("cpus:1;mem:1024")})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_QuotaAccountingReserveAllocatedResources(policy: str) -> None:
    m = MesosAllocator(policy)
    m.update_quota("quota-role", "cpus:10;mem:1024")
    framework = m.add_framework("quota-role")
    agent1 = m.add_slave("cpus:5;mem:512")
    assert m.next() == (framework, {agent1: R("cpus:5;mem:512")})
    m.update_allocation(
        framework, agent1, "cpus:5;mem:512", reserved("cpus:5;mem:512", "quota-role", "DYNAMIC")
    )
    # reserving what it holds changes nothing of its quota: half of agent2 is its due
    agent2 = m.add_slave("cpus:10;mem:1024")
    assert m.next() == (framework, {agent2: R("cpus:5;mem:512")})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_QuotaAccountingUnreserveAllocatedResources(policy: str) -> None:
    m = MesosAllocator(policy)
    m.update_quota("quota-role", "cpus:1;mem:1024")
    framework = m.add_framework("quota-role")
    mine = "cpus(quota-role):1;mem(quota-role):1024"
    agent1 = m.add_slave(mine)
    assert m.next() == (framework, {agent1: R(mine)})
    m.add_slave("cpus:1;mem:1024")
    assert m.pending()  # its quota is met by agent1
    m.update_allocation(framework, agent1, mine, "cpus:1;mem:1024")
    m.advance()
    assert m.pending()  # unreserving what it holds changes nothing of its quota


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_ReservationWithinQuota(policy: str) -> None:
    m = MesosAllocator(policy)
    m.update_quota("quota-role", "cpus:2;mem:256")
    framework1 = m.add_framework("quota-role")
    framework2 = m.add_framework("non-quota-role")
    agent1 = m.add_slave(
        "cpus:8;mem(quota-role):256", used={framework1: "cpus:2;mem(quota-role):256"}
    )
    assert m.next() == (framework2, {agent1: R("cpus:6")})
    agent2 = m.add_slave("cpus:4")
    assert m.next() == (framework2, {agent2: R("cpus:4")})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_QuotaSetAsideReservedResources(policy: str) -> None:
    m = MesosAllocator(policy)
    agent1 = m.add_slave("cpus:4;mem:512;disk:0")
    agent2 = m.add_slave("cpus:4;mem:512;disk:0")
    theirs = reserved("cpus:4;mem:512", "no-quota-role", "DYNAMIC")
    m.update_available(agent2, "cpus:4;mem:512", theirs)
    framework1 = m.add_framework("quota-role")
    m.update_quota("quota-role", "cpus:4;mem:512")
    assert m.next() == (framework1, {agent1: R("cpus:4;mem:512")})
    m.recover(framework1, agent1, R("cpus:4;mem:512"), refuse=10)
    m.advance()
    assert m.pending()  # agent2's reserved resources are not the quota role's
    framework2 = m.add_framework("no-quota-role")
    assert m.next() == (framework2, {agent2: R(theirs)})
    m.recover(framework2, agent2, R(theirs), refuse=10)
    m.advance()
    assert m.pending()


@pytest.mark.parametrize("policy", NESTED)
def test_allocator_OfferAncestorReservationsToDescendantChild(policy: str) -> None:
    m = MesosAllocator(policy)
    framework = m.add_framework("a/b/c")
    agent1 = m.add_slave("cpus(a):1;mem(a):512;disk(a):0")
    assert m.next() == (framework, {agent1: R("cpus(a):1;mem(a):512")})
    agent2 = m.add_slave("cpus:2;mem:1024;disk:0;cpus(a/b):4;mem(a/b):2048;disk(a/b):0")
    assert m.next() == (framework, {agent2: R("cpus:2;mem:1024;cpus(a/b):4;mem(a/b):2048")})


@pytest.mark.parametrize("policy", NESTED)
def test_allocator_QuotaWithAncestorReservations(policy: str) -> None:
    m = MesosAllocator(policy)
    m.update_quota("quota-role", "cpus:1;mem:1024")
    agent1 = m.add_slave("cpus(a):1;mem(a):1024")
    framework1 = m.add_framework("a/b")
    assert m.next() == (framework1, {agent1: R("cpus(a):1;mem(a):1024")})
    framework2 = m.add_framework("no-quota-role")
    assert m.pending()
    m.add_slave("cpus:1;mem:1024")
    m.add_slave("cpus:1;mem:1024")
    # one agent is held back for the quota role; the other is framework2's
    framework, offers = m.next()
    assert framework == framework2
    assert sum(offers.values(), Resources()) == R("cpus:1;mem:1024")
    assert m.pending()


@pytest.mark.parametrize("policy", NESTED)
def test_allocator_QuotaWithNestedRoleReservation(policy: str) -> None:
    m = MesosAllocator(policy)
    m.update_quota("a", "cpus:2;mem:200")
    m.add_slave("cpus(a/b):1;mem(a/b):100")
    agent2 = m.add_slave("cpus:10;mem:1000")
    framework1 = m.add_framework("a")
    # a/b's reservation counts towards a's quota: a is offered the rest of it
    assert m.next() == (framework1, {agent2: R("cpus:1;mem:100")})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_UpdateAllocation(policy: str) -> None:
    m = MesosAllocator(policy)
    slave = m.add_slave("cpus:100;mem:100;disk:100")
    framework = m.add_framework("role1")
    assert m.next() == (framework, {slave: R("cpus:100;mem:100;disk:100")})
    updated = "cpus:100;mem:100;disk:95;disk[ID:data]:5"
    m.update_allocation(framework, slave, "cpus:100;mem:100;disk:100", updated)
    m.recover(framework, slave, R(updated))
    m.advance()
    assert m.next() == (framework, {slave: R(updated)})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_UpdateSlaveTotalResources(policy: str) -> None:
    m = MesosAllocator(policy)
    agent = m.add_slave("cpus:100;mem:100;disk:100")
    framework = m.add_framework("role1")
    assert m.next() == (framework, {agent: R("cpus:100;mem:100;disk:100")})
    m.update_slave(agent, "cpus:112;mem:100;disk:100")  # more: the rest is offered
    assert m.next() == (framework, {agent: R("cpus:12")})
    # differs: a total below what is in use is refused and the old one kept (our master
    # keeps a re-registering slave's total then: its tasks' resources stay theirs), where
    # Mesos's allocator takes it and offers nothing until enough is recovered
    with pytest.raises(AllocatorError, match="lacks"):
        m.update_slave(agent, "cpus:50;mem:50;disk:50")
    assert m.allocator.total == R("cpus:112;mem:100;disk:100")
    m.recover(framework, agent, R("cpus:112;mem:100;disk:100"))
    m.update_slave(agent, "cpus:50;mem:50;disk:50")  # nothing in use: taken
    assert m.next() == (framework, {agent: R("cpus:50;mem:50;disk:50")})
    m.update_slave(agent, "cpus:100;mem:100;disk:100")  # back: what it adds is offered
    assert m.next() == (framework, {agent: R("cpus:50;mem:50;disk:50")})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_UpdateAllocationRemoveResources(policy: str) -> None:
    m = MesosAllocator(policy)
    slave = m.add_slave("cpus:100;mem:100;disk:100")
    framework = m.add_framework("role1")
    assert m.next() == (framework, {slave: R("cpus:100;mem:100;disk:100")})
    m.update_allocation(framework, slave, "cpus:100;mem:100;disk:100", "cpus:100;mem:100")
    m.recover(framework, slave, R("cpus:100;mem:100"))
    m.advance()
    assert m.next() == (framework, {slave: R("cpus:100;mem:100")})
    assert m.allocator.total == R("cpus:100;mem:100")


# -- filters, suppress and revive, recovery, minimum offers ------------------------------------


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_OfferFilter(policy: str) -> None:
    m = MesosAllocator(policy)
    framework = m.add_framework("role")
    agent = m.add_slave("cpus:1;mem:512;disk:0")
    whole = R("cpus:1;mem:512")
    assert m.next() == (framework, {agent: whole})
    m.recover(framework, agent, whole, refuse=2.0)  # two allocation intervals
    m.advance()
    assert m.pending()  # filtered
    m.advance()
    assert m.next() == (framework, {agent: whole})  # the filter lapsed


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_RemoveFilters(policy: str) -> None:
    m = MesosAllocator(policy)
    framework = m.add_framework("role")
    agent = m.add_slave("cpus:1;mem:512;disk:0")
    whole = R("cpus:1;mem:512")
    assert m.next() == (framework, {agent: whole})
    m.recover(framework, agent, whole, refuse=2.0)
    m.advance()
    assert m.pending()  # filtered
    m.update_slave_attributes(agent)  # (re-registered with foo:bar;baz:quux)
    assert m.next() == (framework, {agent: whole})  # the decline is forgotten


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_SmallOfferFilterTimeout(policy: str) -> None:
    # a filter shorter than an allocation interval (1 s of a minute's) is kept one
    # interval (MESOS-4302): the offer cycle's decline, with a minute's interval.
    # differs at the boundary: ours lapses at the round one interval on, where Mesos's
    # round at that instant still honours it (its expiry timer fires after the round);
    # replayed a tick before that round
    m = MesosAllocator(policy)
    cycle = OfferCycle(m.allocator, CycleBooks(), CycleConfig(policy, allocation_interval=60))
    framework1 = m.add_framework("role")
    framework2 = m.add_framework("role")
    whole = R("cpus:1;mem:512")
    m.add_slave("cpus:1;mem:512;disk:0", used={framework1: "cpus:1;mem:512"})
    agent2 = m.add_slave("cpus:1;mem:512;disk:0")
    assert m.next() == (framework2, {agent2: whole})
    cycle.decline(framework2, agent2, whole, 1.0, m.now)
    m.advance(59.9)  # the next batch allocation: framework2's filter stands still
    assert m.next() == (framework1, {agent2: whole})
    m.recover(framework1, agent2, whole)
    m.advance(60)
    assert m.next() == (framework2, {agent2: whole})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_RecoverResources(policy: str) -> None:
    m = MesosAllocator(policy)
    slave = m.add_slave("cpus(role1):1;mem(role1):200;cpus:1;mem:200;disk:0")
    framework = m.add_framework("role1")
    reserved, unreserved = R("cpus(role1):1;mem(role1):200"), R("cpus:1;mem:200")
    assert m.next() == (framework, {slave: reserved + unreserved})
    m.recover(framework, slave, reserved)
    m.advance()
    assert m.next() == (framework, {slave: reserved})
    m.recover(framework, slave, unreserved)
    m.advance()
    assert m.next() == (framework, {slave: unreserved})


MIN_CPUS, MIN_MEM = 0.01, 32.0  # Mesos's default --min_allocatable_resources


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_Allocatable(policy: str) -> None:
    m = MesosAllocator(policy)
    framework = m.add_framework("role1")
    m.add_slave(f"cpus:{MIN_CPUS / 2};mem:{MIN_MEM / 2};disk:128")  # too little of both
    assert m.pending()
    slave2 = f"cpus:{MIN_CPUS};mem:{MIN_MEM / 2};disk:128"  # enough cpus
    agent2 = m.add_slave(slave2)
    assert m.next() == (framework, {agent2: R(slave2)})
    slave3 = f"cpus:{MIN_CPUS / 2};mem:{MIN_MEM};disk:128"  # enough mem
    agent3 = m.add_slave(slave3)
    assert m.next() == (framework, {agent3: R(slave3)})
    slave4 = (  # enough cpus, unreserved and reserved together
        f"cpus:{MIN_CPUS * 3 / 2};mem:{MIN_MEM / 2};"
        f"cpus(role1):{MIN_CPUS * 3 / 2};mem(role1):{MIN_MEM / 2};disk:128"
    )
    agent4 = m.add_slave(slave4)
    assert m.next() == (framework, {agent4: R(slave4)})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_FrameworkMinAllocatable(policy: str) -> None:
    m = MesosAllocator(policy)  # the master's minimum: cpus:0.01|mem:32 (Mesos's default)
    framework = m.add_framework("role1")
    slave = f"cpus:{0.01 / 2};mem:{32 / 2};disk:128"
    agent = m.add_slave(slave)
    assert m.pending()  # under the master's minimum
    # its own offer filters (updateFramework) replace the master's minimum for it
    m.allocator.set_min_allocatable(framework, [R("cpus:0.003")])
    m.advance()
    assert m.next() == (framework, {agent: R(slave)})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_FrameworkEmptyMinAllocatable(policy: str) -> None:
    m = MesosAllocator(policy)
    framework = m.add_framework("role1")
    m.allocator.set_min_allocatable(framework, [])  # offer filters with no minimum
    slave = f"cpus:{0.01 / 2};mem:{32 / 2};disk:128"
    agent = m.add_slave(slave)
    assert m.next() == (framework, {agent: R(slave)})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_UpdateAvailableSuccess(policy: str) -> None:
    m = MesosAllocator(policy)
    agent = m.add_slave("cpus:100;mem:100;disk:100")
    m.update_available(agent, "cpus:25;mem:50", "cpus(role1,ops):25;mem(role1,ops):50")
    framework = m.add_framework("role1")
    updated = R("cpus:75;mem:50;disk:100;cpus(role1,ops):25;mem(role1,ops):50")
    assert m.next() == (framework, {agent: updated})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_UpdateAvailableFail(policy: str) -> None:
    m = MesosAllocator(policy)
    agent = m.add_slave("cpus:100;mem:100;disk:100")
    framework = m.add_framework("role1")
    assert m.next() == (framework, {agent: R("cpus:100;mem:100;disk:100")})
    with pytest.raises(AllocatorError, match="free"):  # all of it is offered
        m.update_available(agent, "cpus:25;mem:50", "cpus(role1,ops):25;mem(role1,ops):50")


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_RemoveSlaveRecoverResources(policy: str) -> None:
    m = MesosAllocator(policy)
    agent1 = m.add_slave("cpus:2;mem:200")
    framework1 = m.add_framework("role")
    assert m.next() == (framework1, {agent1: R("cpus:2;mem:200")})
    framework2 = m.add_framework("role")
    agent2 = m.add_slave("cpus:1;mem:100")
    assert m.next() == (framework2, {agent2: R("cpus:1;mem:100")})
    m.allocator.remove_slave(agent1)  # what framework1 held there is recovered
    agent3 = m.add_slave("cpus:1;mem:100")
    assert m.next() == (framework1, {agent3: R("cpus:1;mem:100")})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_NoDoubleAccounting(policy: str) -> None:
    m = MesosAllocator(policy)
    framework1 = m.add_framework("ROLE1")
    m.add_slave("cpus:1;mem:0;disk:0", used={framework1: "cpus:1"})
    # framework2's agent comes first (a failover: it has not re-subscribed yet), then
    # framework2 with what it runs there (our master adopts it as it subscribes)
    agent2 = m.add_slave("cpus:1;mem:0;disk:0", used={"framework2": "cpus:1"})
    framework2 = m.add_framework("ROLE2")
    m.allocator.adopt(framework2, agent2, R("cpus:1"))
    a = m.allocator
    shares = [
        Resources.from_millis(a.roles.held(r)).dominant_share(a.total) for r in ("ROLE1", "ROLE2")
    ]
    assert shares == [0.5, 0.5]  # Mesos's allocator/mesos/roles/<role>/shares/dominant
    assert a.allocated_total() == R("cpus:2")  # each counted once


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_DeactivateAndReactivateFramework(policy: str) -> None:
    m = MesosAllocator(policy)
    agent = m.add_slave("cpus:2;mem:1024;disk:0")
    framework = m.add_framework("role1")
    whole = R("cpus:2;mem:1024")
    assert m.next() == (framework, {agent: whole})
    m.recover(framework, agent, whole)
    m.allocator.suppress(framework)
    m.allocator.deactivate(framework)
    m.advance()
    assert m.pending()
    m.allocator.activate(framework)
    m.allocator.revive(framework)
    m.advance()
    assert m.next() == (framework, {agent: whole})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_SuppressAndReviveOffers(policy: str) -> None:
    m = MesosAllocator(policy)
    agent = m.add_slave("cpus:2;mem:1024;disk:0")
    framework = m.add_framework("role1")
    whole = R("cpus:2;mem:1024")
    assert m.next() == (framework, {agent: whole})
    m.allocator.revive(framework)  # nothing is free: nothing to offer
    m.advance()
    assert m.pending()
    m.recover(framework, agent, whole)
    m.allocator.suppress(framework)
    m.advance()
    assert m.pending()  # suppressed
    m.allocator.revive(framework)
    m.advance()
    assert m.next() == (framework, {agent: whole})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_ReviveOffers(policy: str) -> None:
    m = MesosAllocator(policy)
    agent = m.add_slave("cpus:2;mem:1024;disk:0")
    framework = m.add_framework("role1")
    whole = R("cpus:2;mem:1024")
    assert m.next() == (framework, {agent: whole})
    m.recover(framework, agent, whole, refuse=1000.0)
    m.advance()
    assert m.pending()  # filtered for 1000 s
    m.allocator.revive(framework)  # clears its filters
    m.advance()
    assert m.next() == (framework, {agent: whole})


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_NonScalarReservationTrackingMESOS_9555(policy: str) -> None:
    m = MesosAllocator(policy)
    resources = "cpus:1;mem:1;disk:1;ports(role):[1-2]"  # a reserved range
    agent1, agent2 = m.add_slave(resources), m.add_slave(resources)
    m.allocator.remove_slave(agent1)
    m.allocator.remove_slave(agent2)  # (Mesos crashed here, its books out of step)
    assert m.allocator.total == Resources()
    assert m.allocator.allocated_total() == Resources()


@pytest.mark.parametrize("policy", NESTED)
def test_allocator_FrameworkLoopMESOS_9554(policy: str) -> None:
    # differs: Mesos offers refined reservations only to frameworks with the
    # RESERVATION_REFINEMENT capability, so framework2 is passed over (and the loop over
    # it ended, MESOS-9554); drfmesos offers them to every framework of the role, and
    # framework2, holding nothing, is first
    m = MesosAllocator(policy)
    framework1 = m.add_framework("parent/child")
    agent1 = m.add_slave("cpus:1;mem:1;disk:1")
    assert m.next() == (framework1, {agent1: R("cpus:1;mem:1;disk:1")})
    framework2 = m.add_framework("parent/child")
    assert m.pending()
    refined = ";".join(f"{name}(parent,)(parent/child,):1" for name in ("cpus", "mem", "disk"))
    agent2 = m.add_slave(refined)
    assert m.next() == (framework2, {agent2: R(refined)})


# -- multi-role frameworks (MULTI_ROLE) -----------------------------------------------------


@pytest.mark.parametrize("policy", FLAT)
def test_allocator_SuppressAndReviveOffersWithMultiRole(policy: str) -> None:
    m = MesosAllocator(policy)
    framework = m.add_framework("*", roles=["role1", "role2"])
    m.allocator.suppress(framework, ["role1"])
    agent = m.add_slave("cpus:2;mem:1024;disk:0")
    whole = R("cpus:2;mem:1024")
    # role1 suppressed: the framework's offer is role2's
    assert m.next_roles() == (framework, {"role2": {agent: whole}})
    day = 24 * 3600.0
    m.recover(framework, agent, whole, refuse=day, role="role2")
    m.advance()
    assert m.pending()  # role2 declined it for a day, role1 is suppressed
    m.allocator.revive(framework, ["role1"])  # role2's filter stands
    m.advance()
    assert m.next_roles() == (framework, {"role1": {agent: whole}})
    m.recover(framework, agent, whole, refuse=day, role="role1")
    m.advance()
    assert m.pending()  # both roles' filters stand


# -- reservation_tests.cpp, persistent_volume_tests.cpp --------------------------------------
#
# Mesos's ReservationTest and PersistentVolumeTest run a master, an agent and schedulers;
# what the master and its allocator decide -- which role is offered what after a RESERVE,
# UNRESERVE, CREATE or DESTROY, which operation is dropped -- is replayed here on our
# master in process, with a fake agent (the agent's own part, checkpointing and restarts,
# is tested end to end where the table says).


class MesosMaster:
    """Mesos's master-and-agent fixture over our master in process: one agent, schedulers
    subscribed in a role, and each scheduler's offers read in order."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.seen: dict[str, int] = {}  # offers read, by scheduler

    async def agent(self, resources: str, agent: str = "agent1") -> FakeSlave:
        return await self.cluster.slave(agent, R(resources))

    async def scheduler(
        self, role: str, name: str = "sched1", *, shared: bool = False, **subscribe: object
    ) -> FakeFramework:
        """`shared`: with the SHARED_RESOURCES capability."""
        if shared:
            subscribe["capabilities"] = [FrameworkCapability.SHARED_RESOURCES]
        fw = await self.cluster.framework(name, role=role, **subscribe)
        self.seen[fw.framework_id] = 0
        return fw

    async def offer(self, fw: FakeFramework) -> WireOffer:
        """Its next offer (Mesos's `AWAIT_READY(offers)`)."""
        offer = await fw.next_offer(after=self.seen[fw.framework_id])
        self.seen[fw.framework_id] += 1
        return offer

    async def accept(
        self,
        fw: FakeFramework,
        offer: WireOffer,
        operations: list[tuple[str, str] | OfferOperation],
        tasks: list[TaskInfo] | None = None,
        refuse: float = 0.0,
    ) -> None:
        """Mesos's `acceptOffers({offer}, {RESERVE(...), ..., LAUNCH(...)}, filters)`."""
        ops = [
            op if isinstance(op, OfferOperation) else OfferOperation(type=op[0], resources=R(op[1]))
            for op in operations
        ]
        accept = Accept(
            framework_id=fw.framework_id,
            offer_ids=[offer.offer_id],
            operations=ops,
            tasks=tasks or [],
            filters=Filters(refuse_seconds=refuse),
        )
        await fw.bus.publish(fw.to_master, accept)

    async def decline(self, fw: FakeFramework, offer: WireOffer, refuse: float) -> None:
        await fw.decline(offer, refuse=refuse)


@pytest.fixture
async def mesos(cluster: Cluster) -> MesosMaster:
    return MesosMaster(cluster)


def offered(offer: WireOffer) -> Resources:
    return offer.resources


# the principal of every scheduler here (no credentials: the master's unauthenticated one)
P = "framework"
YEAR = 365 * 24 * 3600.0  # a filter's longest


async def test_reservation_ReserveThenUnreserve(mesos: MesosMaster) -> None:
    await mesos.agent("cpus:1;mem:512")
    sched = await mesos.scheduler("role")
    offer = await mesos.offer(sched)
    assert offer.resources == R("cpus:1;mem:512")
    await mesos.accept(sched, offer, [("RESERVE", "cpus(role,):1;mem(role,):512")])
    offer = await mesos.offer(sched)
    assert offer.resources == R(f"cpus(role,{P}):1;mem(role,{P}):512")
    await mesos.accept(sched, offer, [("UNRESERVE", f"cpus(role,{P}):1;mem(role,{P}):512")])
    offer = await mesos.offer(sched)
    assert offer.resources == R("cpus:1;mem:512")


async def test_reservation_ReserveTwiceWithDoubleValue(mesos: MesosMaster) -> None:
    await mesos.agent("cpus:1;mem:512")
    sched = await mesos.scheduler("role")
    offer = await mesos.offer(sched)
    await mesos.accept(sched, offer, [("RESERVE", "cpus(role,):0.1;mem(role,):32")])
    offer = await mesos.offer(sched)
    await mesos.accept(sched, offer, [("RESERVE", "cpus(role,):0.1;mem(role,):32")])
    offer = await mesos.offer(sched)
    # 0.1 + 0.1 is 0.2 exactly (Mesos's fixed-point scalars; our millis)
    assert offer.resources[f"cpus(role,{P})"] == 0.2
    assert offer.resources == R(f"cpus(role,{P}):0.2;mem(role,{P}):64;cpus:0.8;mem:448")


async def test_reservation_ReserveAndLaunchThenUnreserve(mesos: MesosMaster) -> None:
    agent = await mesos.agent("cpus:1;mem:512")
    sched = await mesos.scheduler("role")
    offer = await mesos.offer(sched)
    reserved = f"cpus(role,{P}):1;mem(role,{P}):512"
    task = sched.task(offer, R(reserved))
    await mesos.accept(sched, offer, [("RESERVE", "cpus(role,):1;mem(role,):512")], [task])
    run = await agent.run_task()
    assert run.task.resources == R(reserved)
    await agent.report(sched.framework_id, task.task_id, TaskState.FINISHED)
    offer = await mesos.offer(sched)  # what the task held, still reserved
    assert offer.resources == R(reserved)
    await mesos.accept(sched, offer, [("UNRESERVE", reserved)])
    offer = await mesos.offer(sched)
    assert offer.resources == R("cpus:1;mem:512")


async def test_reservation_ReserveShareWithinRole(mesos: MesosMaster) -> None:
    await mesos.agent("cpus:1;mem:512")
    sched1 = await mesos.scheduler("role", "sched1")
    offer = await mesos.offer(sched1)
    await mesos.accept(sched1, offer, [("RESERVE", "cpus(role,):1;mem(role,):512")])
    offer = await mesos.offer(sched1)
    reserved = R(f"cpus(role,{P}):1;mem(role,{P}):512")
    assert offer.resources == reserved
    await mesos.decline(sched1, offer, refuse=YEAR)  # "forever" (the most a filter may be)
    sched2 = await mesos.scheduler("role", "sched2")  # the same role: offered them
    assert (await mesos.offer(sched2)).resources == reserved


async def test_reservation_DropReserveTooLarge(mesos: MesosMaster) -> None:
    await mesos.agent("cpus:1;mem:512")
    sched = await mesos.scheduler("role")
    offer = await mesos.offer(sched)
    await mesos.accept(sched, offer, [("RESERVE", "cpus(role,):1;mem(role,):1024")])
    offer = await mesos.offer(sched)  # dropped: as they were
    assert offer.resources == R("cpus:1;mem:512")


async def test_reservation_DropReserveWithDifferentRole(mesos: MesosMaster) -> None:
    await mesos.agent("cpus:1;mem:512")
    sched = await mesos.scheduler("role")
    offer = await mesos.offer(sched)
    await mesos.accept(sched, offer, [("RESERVE", "cpus(other-role,):1;mem(other-role,):512")])
    offer = await mesos.offer(sched)  # dropped: a framework reserves for its own role
    assert offer.resources == R("cpus:1;mem:512")


async def reserve_then_unreserve(mesos: MesosMaster) -> None:
    """A framework reserves what it is offered in its principal's name, and gives it back."""
    await mesos.agent("cpus:1;mem:512")
    sched = await mesos.scheduler("role")
    offer = await mesos.offer(sched)
    assert offer.resources == R("cpus:1;mem:512")
    reserved = f"cpus(role,{P}):1;mem(role,{P}):512"
    await mesos.accept(sched, offer, [("RESERVE", reserved)])
    offer = await mesos.offer(sched)
    assert offer.resources == R(reserved)
    await mesos.accept(sched, offer, [("UNRESERVE", reserved)])
    assert (await mesos.offer(sched)).resources == R("cpus:1;mem:512")


async def test_reservation_WithoutAuthenticationWithPrincipal(mesos: MesosMaster) -> None:
    await reserve_then_unreserve(mesos)


async def test_reservation_WithoutAuthenticationWithoutPrincipal(mesos: MesosMaster) -> None:
    # differs: a reservation is always in a principal's name; one left out is the
    # caller's (Mesos reserves without one when the framework has none)
    await mesos.agent("cpus:1;mem:512")
    sched = await mesos.scheduler("role")
    offer = await mesos.offer(sched)
    await mesos.accept(sched, offer, [("RESERVE", "cpus(role,):1;mem(role,):512")])
    offer = await mesos.offer(sched)
    assert offer.resources == R(f"cpus(role,{P}):1;mem(role,{P}):512")


async def test_reservation_SendingCheckpointResourcesMessage(mesos: MesosMaster) -> None:
    agent = await mesos.agent("cpus:1;mem:512")
    sched = await mesos.scheduler("role")
    offer = await mesos.offer(sched)
    await mesos.accept(
        sched,
        offer,
        [
            ("RESERVE", "cpus(role,):1"),
            ("RESERVE", "mem(role,):512"),
            ("UNRESERVE", f"cpus(role,{P}):1"),
        ],
    )
    # each operation checkpointed on the agent, in order: the last is what it keeps
    kept = R(f"mem(role,{P}):512")
    await agent.inbox.wait_count(CheckpointResources, 3)
    checkpoints = [c.resources for c in agent.inbox.of(CheckpointResources)]
    assert checkpoints == [R(f"cpus(role,{P}):1"), R(f"cpus(role,{P}):1") + kept, kept]
    assert (await mesos.offer(sched)).resources == R(f"cpus:1;mem(role,{P}):512")


async def test_reservation_PreventUnreservingAlienResources(mesos: MesosMaster) -> None:
    # a reservation made by another principal (an operator's, here) is not the
    # framework's to unreserve
    await mesos.agent("cpus:1;mem:512")
    sched = await mesos.scheduler("role")
    offer = await mesos.offer(sched)
    await mesos.accept(sched, offer, [("RESERVE", "cpus(role,):1;mem(role,):512")])
    offer = await mesos.offer(sched)
    await mesos.decline(sched, offer, refuse=YEAR)
    # an operator's reservation in place of the framework's cpus (on free resources)
    master = mesos.cluster.master
    await eventually(lambda: not master.books.offers)
    operate = master.resource_operations.by_operator
    operate("agent1", OfferOperation(type="UNRESERVE", resources=R(f"cpus(role,{P}):1")), "ops")
    operate("agent1", OfferOperation(type="RESERVE", resources=R("cpus(role,ops):1")), "ops")
    await sched.bus.publish(sched.to_master, Revive(framework_id=sched.framework_id))
    offer = await mesos.offer(sched)
    assert offer.resources == R(f"cpus(role,ops):1;mem(role,{P}):512")
    await mesos.accept(sched, offer, [("UNRESERVE", "cpus(role,ops):1")])
    offer = await mesos.offer(sched)  # dropped: ops reserved them
    assert offer.resources == R(f"cpus(role,ops):1;mem(role,{P}):512")


async def test_volume_CreateAndDestroyPersistentVolumes(mesos: MesosMaster) -> None:
    await mesos.agent("cpus:1;mem:512;disk:2048")
    sched = await mesos.scheduler("role")
    offer = await mesos.offer(sched)
    assert offer.resources == R("cpus:1;mem:512;disk:2048")
    volume = f"disk(role,{P})[id1:path1]:2048"
    await mesos.accept(sched, offer, [("RESERVE", "disk(role,):2048"), ("CREATE", volume)])
    offer = await mesos.offer(sched)
    assert offer.resources == R(f"cpus:1;mem:512;{volume}")
    await mesos.accept(sched, offer, [("DESTROY", volume)])
    offer = await mesos.offer(sched)  # the disk back, still reserved
    assert offer.resources == R(f"cpus:1;mem:512;disk(role,{P}):2048")


async def test_volume_DestroyPersistentVolumeMultipleTasks(mesos: MesosMaster) -> None:
    agent = await mesos.agent("cpus:2;mem:1024;disk:2048")
    sched = await mesos.scheduler("role")
    offer = await mesos.offer(sched)
    v1 = f"disk(role,{P})[id1:path1]:1024"
    v2 = f"disk(role,{P})[id2:path2]:1024"
    reserve = [("RESERVE", "disk(role,):2048"), ("CREATE", v1), ("CREATE", v2)]
    t1 = mesos_task(sched, offer, f"cpus:1;mem:512;{v1}", "t1")
    t2 = mesos_task(sched, offer, f"cpus:1;mem:512;{v2}", "t2")
    await mesos.accept(sched, offer, reserve, [t1, t2], refuse=0)
    await agent.run_task()
    await agent.run_task()
    await agent.report(sched.framework_id, "t2", TaskState.FINISHED)
    offer = await mesos.offer(sched)  # v2, free again
    assert offer.resources == R(f"cpus:1;mem:512;{v2}")
    # v1 is in use: its DESTROY is dropped (not even offered); v2's goes through
    await mesos.accept(sched, offer, [("DESTROY", v1), ("DESTROY", v2)])
    offer = await mesos.offer(sched)
    assert offer.resources == R(f"cpus:1;mem:512;disk(role,{P}):1024")
    await agent.report(sched.framework_id, "t1", TaskState.FINISHED)
    await mesos.decline(sched, offer, refuse=0)
    offer = await mesos.offer(sched)
    assert offer.resources == R(f"cpus:2;mem:1024;disk(role,{P}):1024;{v1}")
    await mesos.accept(sched, offer, [("DESTROY", v1)])
    offer = await mesos.offer(sched)
    assert offer.resources == R(f"cpus:2;mem:1024;disk(role,{P}):2048")


async def test_volume_MasterFailover(mesos: MesosMaster) -> None:
    # a new master learns an agent's volume from its registration (the agent keeps it):
    # offered to the volume's role, as it was, and to no other
    volume = f"disk(role,{P})[id1:path1]:1024"
    await mesos.agent(f"cpus:1;mem:512;{volume}")
    other = await mesos.scheduler("other", "other")
    first = await mesos.offer(other)
    assert first.resources == R("cpus:1;mem:512")
    await mesos.decline(other, first, refuse=YEAR)
    sched = await mesos.scheduler("role")
    offer = await mesos.offer(sched)
    assert offer.resources == R(f"cpus:1;mem:512;{volume}")


# shared persistent volumes (SHARED_RESOURCES): offered while tasks use them, used by
# several tasks at once (the agent's part, two tasks writing one volume:
# tests/test_volumes_live.py::test_two_tasks_share_one_volume)

V1 = "disk(role)[id1:path1]<SHARED>"
V2 = "disk(role)[id2:path2]<SHARED>"


def copies(mesos: MesosMaster, fw: FakeFramework, key: str, agent: str = "agent1") -> float:
    """How much of a shared volume a framework holds on an agent (its copies' sum)."""
    return mesos.cluster.master.allocator.held(fw.framework_id, agent)[key]


async def test_volume_SharedPersistentVolumeMultipleTasks(mesos: MesosMaster) -> None:
    agent = await mesos.agent("cpus:2;mem:1024;disk(role):1024")
    sched = await mesos.scheduler("role", shared=True)
    offer = await mesos.offer(sched)
    volume = f"{V1}:64"
    t1 = mesos_task(sched, offer, f"cpus:1;mem:128;disk(role):32;{volume}", "t1")
    t2 = mesos_task(sched, offer, f"cpus:1;mem:256;disk(role):64;{volume}", "t2")
    await mesos.accept(sched, offer, [("CREATE", volume)], [t1, t2], refuse=YEAR)
    runs = [await agent.run_task(), await agent.run_task()]
    assert [r.task.resources[V1] for r in runs] == [64, 64]  # each task on the volume
    assert copies(mesos, sched, V1) == 128  # a copy each, one of them past the offer's
    master = mesos.cluster.master
    assert master.allocator.held_on("agent1")[V1] == 64  # the agent's volume, once
    assert master.allocator.allocation(sched.framework_id)["disk"] == 64 + 32 + 64
    for task in ("t1", "t2"):
        await agent.report(sched.framework_id, task, TaskState.FINISHED)
    offer = await mesos.offer(sched)  # their copies back: the offer's one is left
    assert offer.resources[V1] == 64
    assert copies(mesos, sched, V1) == 64


async def test_volume_SharedPersistentVolumeRescindOnDestroy(mesos: MesosMaster) -> None:
    agent = await mesos.agent("cpus:2;mem:1024;disk(role):1024")
    sched1 = await mesos.scheduler("role", "sched1", shared=True)
    offer = await mesos.offer(sched1)
    volumes = f"{V1}:64;{V2}:64"
    task = mesos_task(sched1, offer, "cpus:1;mem:128", "t1")
    # the rest declined for long, so that framework2 is offered it
    await mesos.accept(sched1, offer, [("CREATE", volumes)], [task], refuse=YEAR)
    await agent.run_task()
    sched2 = await mesos.scheduler("role", "sched2", shared=True)
    offer2 = await mesos.offer(sched2)
    assert offer2.resources.contains(R(volumes))
    # the task ends, and framework1 revives (Mesos's test: a filter of 0 seconds, its
    # clock held): offered the task's room, and the volumes again (shared)
    await agent.report(sched1.framework_id, "t1", TaskState.KILLED)
    await sched1.bus.publish(sched1.to_master, Revive(framework_id=sched1.framework_id))
    offer1 = await mesos.offer(sched1)
    assert offer1.resources == R(f"cpus:1;mem:128;{volumes}")
    # framework2 destroys both: framework1's offer holding them is rescinded
    await mesos.accept(sched2, offer2, [("DESTROY", volumes)])
    rescinded = await sched1.inbox.wait_for(Rescind)
    assert rescinded.offer_id == offer1.offer_id
    master = mesos.cluster.master
    await eventually(
        lambda: not any(k.startswith("disk(role)[") for k in master.books.slaves["agent1"].total)
    )
    assert master.allocator.total["disk"] == 1024  # the disk is back


async def test_volume_SharedPersistentVolumeMultipleFrameworks(mesos: MesosMaster) -> None:
    agent = await mesos.agent("cpus:2;mem:1024;disk(role):2048")
    sched1 = await mesos.scheduler("role", "sched1", shared=True)
    offer = await mesos.offer(sched1)
    volume = f"{V1}:2048"
    task1 = mesos_task(sched1, offer, f"cpus:1;mem:128;{volume}", "t1")
    await mesos.accept(sched1, offer, [("CREATE", volume)], [task1], refuse=YEAR)
    await agent.run_task()
    master = mesos.cluster.master
    assert tasks_use(master) == {"cpus": 1, "mem": 128, "disk": 2048}
    sched2 = await mesos.scheduler("role", "sched2", shared=True)
    offer2 = await mesos.offer(sched2)
    assert offer2.resources.contains(R(volume))  # offered while task1 uses it
    task2 = mesos_task(sched2, offer2, f"cpus:1;mem:256;{volume}", "t2")
    await mesos.accept(sched2, offer2, [], [task2], refuse=YEAR)
    run = await agent.run_task()
    assert run.task.resources[V1] == 2048
    # the volume is used by both, counted once: disk_used stays 2048
    assert tasks_use(master) == {"cpus": 2, "mem": 384, "disk": 2048}
    assert master.allocator.held_on("agent1")[V1] == 2048


async def test_a_shared_volume_is_offered_to_its_role_with_the_capability_only(
    mesos: MesosMaster,
) -> None:
    # a tenant of the role without SHARED_RESOURCES, or of another role with it, is
    # never offered the volume (nor could it launch on one it was not offered)
    await mesos.agent("cpus:2;mem:1024;disk(role):1024")
    sched = await mesos.scheduler("role", "sched", shared=True)
    offer = await mesos.offer(sched)
    volume = f"{V1}:512"
    task = mesos_task(sched, offer, f"cpus:1;mem:128;{volume}", "t1")
    await mesos.accept(sched, offer, [("CREATE", volume)], [task], refuse=YEAR)
    rest = R("cpus:1;mem:896;disk(role):512")
    plain = await mesos.scheduler("role", "plain")
    offered = await mesos.offer(plain)
    assert offered.resources == rest  # the role's disk, not its shared volume
    steal = mesos_task(plain, offered, f"cpus:1;mem:128;{volume}", "steal")
    await mesos.accept(plain, offered, [], [steal], refuse=YEAR)
    await plain.update_for("steal", TaskState.ERROR)
    other = await mesos.scheduler("other", "other", shared=True)
    offered = await mesos.offer(other)
    assert offered.resources == R("cpus:1;mem:896")  # neither the role's disk nor volume
    await mesos.decline(other, offered, refuse=YEAR)
    await mesos.cluster.rounds_pass()
    for fw in (plain, other):  # (and nothing else since)
        assert all(V1 not in o.resources for b in fw.inbox.of(WireOffers) for o in b.offers)


def tasks_use(master: Master) -> dict[str, float]:
    """What live tasks use, a shared volume once (Mesos's master/{cpus,mem,disk}_used)."""
    used: dict[str, int] = {}
    for fw in master.books.frameworks.values():
        for task in fw.tasks.values():
            add_millis(used, task.info.resources.millis)
    total = master.books.slaves["agent1"].total.millis
    once = stripped(shared_once(used, total))
    return {n: once.get(n, 0) / 1000 for n in ("cpus", "mem", "disk")}


async def test_volume_SharedPersistentVolumeMasterFailover(mesos: MesosMaster) -> None:
    agent = await mesos.agent("cpus:2;mem:2048;disk(role):2048")
    sched = await mesos.scheduler("role", shared=True, failover_timeout=60)
    offer = await mesos.offer(sched)
    volume = f"{V1}:2048"
    tasks = [mesos_task(sched, offer, f"cpus:0.5;mem:512;{volume}", t) for t in ("t1", "t2")]
    await mesos.accept(sched, offer, [("CREATE", volume)], tasks, refuse=YEAR)
    runs = [await agent.run_task(), await agent.run_task()]
    # the master fails over; the agent comes back with its volume and the two tasks
    cluster = mesos.cluster
    await cluster.master.stop()
    master = await cluster.start_master()
    await agent.bus.publish(
        agent.to_master,
        Reregister(
            slave_id="agent1",
            hostname="agent1.local",
            resources=R(f"cpus:2;mem:2048;{volume}"),
            incarnation=agent.bus.incarnation,
            tasks=[
                RunningTask(framework_id=r.framework_id, task=r.task, state=TaskState.RUNNING)
                for r in runs
            ],
        ),
    )
    await eventually(lambda: "agent1" in master.books.slaves)
    back = await cluster.framework(
        "sched1b", role="role", framework_id=sched.framework_id,
        capabilities=[FrameworkCapability.SHARED_RESOURCES], failover_timeout=60,
    )  # fmt: skip
    mesos.seen[back.framework_id] = 0
    offer2 = await mesos.offer(back)
    # the rest of the agent, and the volume its two tasks use
    assert offer2.resources == R(f"cpus:1;mem:1024;{volume}")
    assert master.allocator.held(back.framework_id, "agent1")[V1] == 2048 * 3  # 2 tasks, 1 offer
    # its tasks use it: a DESTROY is refused
    await mesos.accept(back, offer2, [("DESTROY", volume)])
    offer3 = await mesos.offer(back)
    assert V1 in offer3.resources


async def test_volume_SharedPersistentVolumeMultipleIterations(mesos: MesosMaster) -> None:
    agent = await mesos.agent("cpus:2;mem:1024;disk(role):4096")
    sched = await mesos.scheduler("role", shared=True)
    offer = await mesos.offer(sched)
    task1 = mesos_task(sched, offer, f"cpus:1;mem:128;{V1}:2048", "t1")
    await mesos.accept(sched, offer, [("CREATE", f"{V1}:2048")], [task1])
    await agent.run_task()
    offer = await mesos.offer(sched)
    assert offer.resources.contains(R(f"{V1}:2048"))
    task2 = mesos_task(sched, offer, f"cpus:1;mem:128;{V2}:2048", "t2")
    await mesos.accept(sched, offer, [("CREATE", f"{V2}:2048")], [task2])
    await agent.run_task()
    offer = await mesos.offer(sched)
    assert offer.resources.contains(R(f"{V1}:2048;{V2}:2048"))


async def test_a_shared_volume_is_made_only_with_the_capability(mesos: MesosMaster) -> None:
    # (validation, as Mesos's master: a framework without SHARED_RESOURCES may not make
    # one; it is not offered them, so it cannot use one either)
    await mesos.agent("cpus:1;mem:512;disk(role):1024")
    sched = await mesos.scheduler("role")
    offer = await mesos.offer(sched)
    await mesos.accept(sched, offer, [("CREATE", f"{V1}:64")])
    offer = await mesos.offer(sched)  # dropped
    assert offer.resources == R("cpus:1;mem:512;disk(role):1024")
    task = mesos_task(sched, offer, f"cpus:1;mem:128;{V1}:64", "t1")
    await mesos.accept(sched, offer, [], [task])
    await sched.update_for("t1", TaskState.ERROR)


def mesos_task(fw: FakeFramework, offer: WireOffer, resources: str, task_id: str) -> TaskInfo:
    return fw.task(offer, R(resources), task_id)


# the agent's checkpoint: what a slave keeps of its reservations and volumes, and what
# it does when restarted with other --resources (slave.kept_resources)


async def restarted(work: Path, kept: str, configured: str) -> KeptResources:
    """A slave that checkpointed `kept` and is restarted with --resources `configured`."""
    before = KeptResources(work, R("cpus:2;mem:1024;disk:2048"), logs.get("test"))
    await before.keep(R(kept), Version(1, 1))
    after = KeptResources(work, R(configured), logs.get("test"))
    await after.load()
    return after


async def test_reservation_CompatibleCheckpointedResources(tmp_path: Path) -> None:
    kept = f"cpus(role,{P}):1;mem(role,{P}):512"
    again = await restarted(tmp_path, kept, "cpus:2;mem:1024")  # the same --resources
    assert again.total == R(f"cpus:1;mem:512;{kept}")
    bigger = await restarted(tmp_path, kept, "cpus:4;mem:1024")  # compatible: more
    assert bigger.total == R(f"cpus:3;mem:512;{kept}")


async def test_reservation_CompatibleCheckpointedResourcesWithPersistentVolumes(
    tmp_path: Path,
) -> None:
    volume = f"disk(role,{P})[id1:path1]:1024"
    kept = f"cpus(role,{P}):1;{volume}"
    again = await restarted(tmp_path, kept, "cpus:2;mem:1024;disk:2048")
    assert again.total == R(f"cpus:1;mem:1024;disk:1024;{kept}")


async def test_reservation_IncompatibleCheckpointedResources(tmp_path: Path) -> None:
    # differs: Mesos's agent refuses to start with --resources its checkpointed
    # reservations no longer fit; ours starts with what fits, the rest dropped and logged
    # (`resources.dropped`), so that an operator's smaller slave still serves
    kept = f"cpus(role,{P}):1;mem(role,{P}):512"
    fits = await restarted(tmp_path, kept, "cpus:2;mem:1024")  # compatible: kept
    assert fits.total == R(f"cpus:1;mem:512;{kept}")
    smaller = await restarted(tmp_path, kept, "cpus:2;mem:256")
    assert smaller.kept == R(f"cpus(role,{P}):1")
    assert smaller.total == R(f"cpus:1;cpus(role,{P}):1;mem:256")


async def test_volume_IncompatibleCheckpointedResources(tmp_path: Path) -> None:
    # differs, as test_reservation_IncompatibleCheckpointedResources: a volume whose disk
    # the restarted slave has not is dropped, not a refusal to start
    volume = f"disk(role,{P})[id1:path1]:1024"
    fits = await restarted(tmp_path, volume, "cpus:1;disk:2048")
    assert fits.total == R(f"cpus:1;disk:1024;{volume}")
    smaller = await restarted(tmp_path, volume, "cpus:1;disk:512")
    assert smaller.kept == Resources()
    assert smaller.total == R("cpus:1;disk:512")


# GROW_VOLUME and SHRINK_VOLUME: non-speculative, as Mesos's (the resized volume is offered
# again, not usable by the same Accept's launches); kept by the agent across restarts


def grow(volume: str, addition: str) -> OfferOperation:
    """Mesos's `GROW_VOLUME(volume, addition)`."""
    return OfferOperation(type="GROW_VOLUME", resources=R(volume), addition=R(addition))


def shrink(volume: str, subtract: float) -> OfferOperation:
    """Mesos's `SHRINK_VOLUME(volume, subtract)`."""
    return OfferOperation(type="SHRINK_VOLUME", resources=R(volume), subtract=subtract)


def volumes(offer: WireOffer) -> Resources:
    """Mesos's `Resources(offer.resources()).persistentVolumes()`."""
    return Resources.from_millis({k: v for k, v in offer.resources.millis.items() if "[" in k})


SLAVE = "cpus:2;mem:2048;disk(role):4096"  # Mesos's getSlaveResources() (NONE: one disk)


async def test_volume_GrowVolume(mesos: MesosMaster) -> None:
    agent = await mesos.agent(SLAVE)
    sched = await mesos.scheduler("role/foo")
    offer = await mesos.offer(sched)
    reserved = f"disk(role)(role/foo,{P})"
    volume, addition = f"{reserved}[id1:path1]:3584", f"{reserved}:512"
    await mesos.accept(sched, offer, [("RESERVE", f"{reserved}:4096"), ("CREATE", volume)])
    offer = await mesos.offer(sched)
    assert volumes(offer) == R(volume)
    assert offer.resources.contains(R(addition))
    await mesos.accept(sched, offer, [grow(volume, addition)])
    offer = await mesos.offer(sched)
    grown = f"{reserved}[id1:path1]:4096"
    assert volumes(offer) == R(grown)
    assert not offer.resources.contains(R(addition))
    # the agent keeps the grown volume (its checkpoint), and a task is launched with it
    assert agent.inbox.of(CheckpointResources)[-1].resources == R(grown)
    task = mesos_task(sched, offer, f"cpus:1;mem:128;{grown}", "t1")
    await mesos.accept(sched, offer, [], [task])
    assert (await agent.run_task()).task.resources == R(f"cpus:1;mem:128;{grown}")


async def test_volume_ShrinkVolume(mesos: MesosMaster) -> None:
    agent = await mesos.agent(SLAVE)
    sched = await mesos.scheduler("role/foo")
    offer = await mesos.offer(sched)
    reserved = f"disk(role)(role/foo,{P})"
    volume = f"{reserved}[id1:path1]:4096"
    await mesos.accept(sched, offer, [("RESERVE", f"{reserved}:4096"), ("CREATE", volume)])
    offer = await mesos.offer(sched)
    assert volumes(offer) == R(volume)
    assert not offer.resources.contains(R(f"{reserved}:512"))
    await mesos.accept(sched, offer, [shrink(volume, 512)])
    offer = await mesos.offer(sched)
    shrunk = f"{reserved}[id1:path1]:3584"
    assert volumes(offer) == R(shrunk)
    assert offer.resources.contains(R(f"{reserved}:512"))  # still reserved, as it was
    assert agent.inbox.of(CheckpointResources)[-1].resources == R(f"{shrunk};{reserved}:512")
    task = mesos_task(sched, offer, f"cpus:1;mem:128;{shrunk};{reserved}:512", "t1")
    await mesos.accept(sched, offer, [], [task])
    assert (await agent.run_task()).task.resources.contains(R(shrunk))


async def test_volume_NonSpeculativeGrowAndLaunch(mesos: MesosMaster) -> None:
    await mesos.agent(SLAVE)
    sched = await mesos.scheduler("role")
    offer = await mesos.offer(sched)
    volume, grown = "disk(role)[id1:path1]:3584", "disk(role)[id1:path1]:4096"
    task1 = mesos_task(sched, offer, f"cpus:1;mem:128;{grown}", "task1")
    task2 = mesos_task(sched, offer, f"cpus:1;mem:128;{volume}", "task2")
    ops = [("CREATE", volume), grow(volume, "disk(role):512")]
    await mesos.accept(sched, offer, ops, [task1, task2])
    # the create and the grow succeed; neither task may use the volume they made
    assert (await sched.update_for("task1", TaskState.ERROR)).state == TaskState.ERROR
    assert (await sched.update_for("task2", TaskState.ERROR)).state == TaskState.ERROR
    offer = await mesos.offer(sched)
    assert volumes(offer) == R(grown)


async def test_volume_NonSpeculativeShrinkAndLaunch(mesos: MesosMaster) -> None:
    await mesos.agent(SLAVE)
    sched = await mesos.scheduler("role")
    offer = await mesos.offer(sched)
    volume, shrunk = "disk(role)[id1:path1]:1024", "disk(role)[id1:path1]:512"
    task1 = mesos_task(sched, offer, f"cpus:1;mem:128;{shrunk}", "task1")
    task2 = mesos_task(sched, offer, f"cpus:1;mem:128;{volume}", "task2")
    await mesos.accept(sched, offer, [("CREATE", volume), shrink(volume, 512)], [task1, task2])
    assert (await sched.update_for("task1", TaskState.ERROR)).state == TaskState.ERROR
    assert (await sched.update_for("task2", TaskState.ERROR)).state == TaskState.ERROR
    offer = await mesos.offer(sched)
    assert volumes(offer) == R(shrunk)


async def test_a_resized_volume_outlives_an_agent_restart(tmp_path: Path) -> None:
    # (the agent's part of GrowVolume and ShrinkVolume: its checkpoint, read again)
    grown = f"disk(role,{P})[id1:path1]:1536"
    again = await restarted(tmp_path, grown, "cpus:2;mem:1024;disk:2048")
    assert again.total == R(f"cpus:2;mem:1024;disk:512;{grown}")


# Mesos's operation ACLs (reserve_resources, unreserve_resources, create_volumes,
# destroy_volumes, resize_volume) are our principals' operation grants
# (`drfmesos auth grant|revoke`, protocol.tooling.operation_grants), read by the master from
# its principals file. "ANY principal" is every principal in the file; a framework without
# a principal is ours without credentials, principal `framework` (P).


@contextlib.asynccontextmanager
async def acl_master(
    tmp_path: Path, grants: dict[str, dict[str, bool | tuple[str, ...]]]
) -> AsyncIterator[MesosMaster]:
    """Mesos's master with `--acls`: each principal (a framework's, in role `role`) and
    the operations granted (True, or a tuple of roles) or revoked (False)."""
    store = Store(tmp_path / "store")
    store.path.mkdir()
    store.save({name: Principal(name, "framework", ("role",)) for name in grants}, {})
    for name, operations in grants.items():
        for operation, allowed in operations.items():
            roles = allowed if isinstance(allowed, tuple) else ()
            store.grant(name, operation, bool(allowed), roles)
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        await c.start_master(dataclasses.replace(FAST, principals=store.principals_file))
        yield MesosMaster(c)


async def acl_scheduler(mesos: MesosMaster, principal: str, name: str) -> FakeFramework:
    fw = await mesos.cluster.framework(name, principal=principal, role="role")
    mesos.seen[fw.framework_id] = 0
    return fw


def refused(fw: FakeFramework) -> list[str]:
    """What the master told `fw` it dropped (Mesos drops an unauthorized operation)."""
    return [e.message for e in fw.inbox.of(Error) if e.code == "invalid-operation"]


async def test_reservation_GoodACLReserveThenUnreserve(tmp_path: Path) -> None:
    async with acl_master(tmp_path, {P: {"reserve": True, "unreserve": True}}) as mesos:
        await reserve_then_unreserve(mesos)


async def test_reservation_BadACLDropReserve(tmp_path: Path) -> None:
    async with acl_master(tmp_path, {P: {"reserve": False}}) as mesos:
        await mesos.agent("cpus:1;mem:512")
        sched = await mesos.scheduler("role")
        offer = await mesos.offer(sched)
        await mesos.accept(sched, offer, [("RESERVE", f"cpus(role,{P}):1;mem(role,{P}):512")])
        assert (await mesos.offer(sched)).resources == R("cpus:1;mem:512")  # dropped
        assert "may not reserve" in refused(sched)[0]


async def test_reservation_BadACLDropUnreserve(tmp_path: Path) -> None:
    async with acl_master(tmp_path, {P: {"reserve": True, "unreserve": False}}) as mesos:
        await mesos.agent("cpus:2;mem:1024")
        sched = await mesos.scheduler("role")
        offer = await mesos.offer(sched)
        reserved1 = f"cpus(role,{P}):1;mem(role,{P}):512"
        reserved2 = f"cpus(role,{P}):0.5;mem(role,{P}):256"
        await mesos.accept(sched, offer, [("RESERVE", reserved1)])
        offer = await mesos.offer(sched)
        assert offer.resources == R(f"{reserved1};cpus:1;mem:512")
        await mesos.accept(sched, offer, [("UNRESERVE", reserved1), ("RESERVE", reserved2)])
        offer = await mesos.offer(sched)  # the UNRESERVE dropped, the RESERVE made
        assert offer.resources == R(f"cpus(role,{P}):1.5;mem(role,{P}):768;cpus:0.5;mem:256")
        assert "may not unreserve" in refused(sched)[0]


async def test_reservation_ACLMultipleOperations(tmp_path: Path) -> None:
    async with acl_master(tmp_path, {P: {"reserve": True, "unreserve": False}}) as mesos:
        agent = await mesos.agent("cpus:2;mem:1024")
        sched = await mesos.scheduler("role")
        offer = await mesos.offer(sched)
        reserved1 = f"cpus(role,{P}):1;mem(role,{P}):512"
        reserved2 = f"cpus(role,{P}):0.5;mem(role,{P}):256"
        both = f"cpus(role,{P}):1.5;mem(role,{P}):768"
        await mesos.accept(sched, offer, [("RESERVE", reserved1)])
        offer = await mesos.offer(sched)
        # unreserve (dropped), reserve a second set, and launch a task on it
        task1 = mesos_task(sched, offer, reserved2, "task1")
        ops = [("UNRESERVE", reserved1), ("RESERVE", reserved2)]
        await mesos.accept(sched, offer, ops, [task1])
        assert (await agent.run_task()).task.resources == R(reserved2)
        await agent.report(sched.framework_id, "task1", TaskState.FINISHED)
        offer = await mesos.offer(sched)  # both reservations: the UNRESERVE was dropped
        assert offer.resources == R(f"{both};cpus:0.5;mem:256")
        # unreserve both (dropped) and launch on the first: it still is, so it runs
        task2 = mesos_task(sched, offer, reserved1, "task2")
        ops = [("UNRESERVE", reserved1), ("UNRESERVE", reserved2)]
        await mesos.accept(sched, offer, ops, [task2])
        assert (await agent.run_task()).task.resources == R(reserved1)
        await agent.report(sched.framework_id, "task2", TaskState.FINISHED)
        assert (await sched.update_for("task2", TaskState.FINISHED)).state == TaskState.FINISHED
        offer = await mesos.offer(sched)
        assert offer.resources == R(f"{both};cpus:0.5;mem:256")


VOLUME = "disk(role)[id1:path1]:2048"  # on Mesos's statically reserved disk


async def test_volume_GoodACLGrowThenShrink(tmp_path: Path) -> None:
    async with acl_master(tmp_path, {P: {"resize-volume": ("role",)}}) as mesos:
        await mesos.agent(SLAVE)
        sched = await mesos.scheduler("role")
        offer = await mesos.offer(sched)
        volume, grown = "disk(role)[id1:path1]:3584", "disk(role)[id1:path1]:4096"
        await mesos.accept(sched, offer, [("CREATE", volume), grow(volume, "disk(role):512")])
        offer = await mesos.offer(sched)
        assert volumes(offer) == R(grown)
        assert not offer.resources.contains(R("disk(role):512"))
        await mesos.accept(sched, offer, [shrink(grown, 512)])
        offer = await mesos.offer(sched)
        assert volumes(offer) == R(volume)
        assert offer.resources.contains(R("disk(role):512"))


async def test_volume_BadACLDropGrowAndShrink(tmp_path: Path) -> None:
    # no principal may resize any volume (Mesos's ANY principal, NONE roles)
    revoked = {"resize-volume": False}
    async with acl_master(tmp_path, {P: revoked, "other": revoked}) as mesos:
        await mesos.agent(SLAVE)
        sched1 = await mesos.scheduler("role", "sched1")
        offer = await mesos.offer(sched1)
        volume = "disk(role)[id1:path1]:3584"
        await mesos.accept(sched1, offer, [("CREATE", volume), grow(volume, "disk(role):512")])
        offer = await mesos.offer(sched1)  # created, not grown
        assert volumes(offer) == R(volume)
        assert offer.resources.contains(R("disk(role):512"))
        await mesos.accept(sched1, offer, [shrink(volume, 512)])
        offer = await mesos.offer(sched1)
        assert volumes(offer) == R(volume)
        assert all("may not resize-volume" in m for m in refused(sched1))
        await mesos.decline(sched1, offer, refuse=YEAR)
        # a second framework (Mesos's has no principal; ours another one) may not either
        sched2 = await acl_scheduler(mesos, "other", "sched2")
        offer = await mesos.offer(sched2)
        assert volumes(offer) == R(volume)
        await mesos.accept(sched2, offer, [grow(volume, "disk(role):512")])
        offer = await mesos.offer(sched2)
        assert volumes(offer) == R(volume)
        await mesos.accept(sched2, offer, [shrink(volume, 512)])
        assert volumes(await mesos.offer(sched2)) == R(volume)


async def test_volume_GoodACLCreateThenDestroy(tmp_path: Path) -> None:
    grants = {P: {"create-volume": True, "destroy-volume": True}}
    async with acl_master(tmp_path, grants) as mesos:
        agent = await mesos.agent("cpus:2;mem:2048;disk(role):2048")
        sched = await mesos.scheduler("role")
        offer = await mesos.offer(sched)
        await mesos.accept(sched, offer, [("CREATE", VOLUME)])
        await agent.inbox.wait_count(CheckpointResources, 1)
        assert agent.inbox.of(CheckpointResources)[0].resources.contains(R(VOLUME))
        offer = await mesos.offer(sched)
        assert offer.resources.contains(R(VOLUME))
        await mesos.accept(sched, offer, [("DESTROY", VOLUME)])
        await agent.inbox.wait_count(CheckpointResources, 2)
        assert agent.inbox.of(CheckpointResources)[1].resources == Resources()
        assert not (await mesos.offer(sched)).resources.contains(R(VOLUME))


async def test_volume_GoodACLNoPrincipal(mesos: MesosMaster) -> None:
    # ANY principal, and frameworks without one, may create and destroy: ours without a
    # principals file (no ACLs), its frameworks without credentials
    agent = await mesos.agent("cpus:2;mem:2048;disk(role):2048")
    sched = await mesos.scheduler("role")
    offer = await mesos.offer(sched)
    await mesos.accept(sched, offer, [("CREATE", VOLUME)])
    offer = await mesos.offer(sched)
    assert offer.resources.contains(R(VOLUME))
    await mesos.accept(sched, offer, [("DESTROY", VOLUME)])
    assert not (await mesos.offer(sched)).resources.contains(R(VOLUME))
    assert agent.inbox.of(CheckpointResources)[-1].resources == Resources()


async def dropped_create_and_destroy(tmp_path: Path, creator: str) -> None:
    """Mesos's BadACLNoPrincipal and BadACLDropCreateAndDestroy: the first framework
    (P) may neither create nor destroy, `creator` may create; the first's CREATE is
    dropped, the creator's made, and the first's DESTROY of it dropped."""
    grants = {
        P: {"create-volume": False, "destroy-volume": False},
        creator: {"create-volume": True, "destroy-volume": False},
    }
    async with acl_master(tmp_path, grants) as mesos:
        await mesos.agent("cpus:2;mem:2048;disk(role):2048")
        sched1 = await mesos.scheduler("role", "sched1")
        offer = await mesos.offer(sched1)
        await mesos.accept(sched1, offer, [("CREATE", VOLUME)])
        offer = await mesos.offer(sched1)
        assert not offer.resources.contains(R(VOLUME))
        assert "may not create-volume" in refused(sched1)[0]
        await mesos.decline(sched1, offer, refuse=YEAR)
        await sched1.bus.publish(sched1.to_master, Suppress(framework_id=sched1.framework_id))
        sched2 = await acl_scheduler(mesos, creator, "sched2")
        offer = await mesos.offer(sched2)
        await mesos.accept(sched2, offer, [("CREATE", VOLUME)])
        offer = await mesos.offer(sched2)
        assert offer.resources.contains(R(VOLUME))
        await mesos.decline(sched2, offer, refuse=YEAR)
        await sched2.bus.publish(sched2.to_master, Suppress(framework_id=sched2.framework_id))
        await sched1.bus.publish(sched1.to_master, Revive(framework_id=sched1.framework_id))
        offer = await mesos.offer(sched1)
        await mesos.accept(sched1, offer, [("DESTROY", VOLUME)])
        offer = await mesos.offer(sched1)  # dropped: the volume stays
        assert offer.resources.contains(R(VOLUME))
        assert "may not destroy-volume" in refused(sched1)[-1]


async def test_volume_BadACLNoPrincipal(tmp_path: Path) -> None:
    # differs: Mesos's framework without a principal is ours without credentials (P),
    # which a grant names as any other (Mesos's ANY entity also matches no principal;
    # ours has none): it may not create; the one with a principal may; nobody destroys
    await dropped_create_and_destroy(tmp_path, "creator")


async def test_volume_BadACLDropCreateAndDestroy(tmp_path: Path) -> None:
    await dropped_create_and_destroy(tmp_path, "creator-principal")


# -- the table of what applies, and the docs ------------------------------------------------

HERE = Path(__file__).parent
ROW = re.compile(
    r"^\| (sorter|allocator|reservation|volume): (\S+) \| (ported|differs|n/a|elsewhere) \|(.*)\|$"
)
KINDS = ("test_sorter_", "test_allocator_", "test_reservation_", "test_volume_")
ELSEWHERE = re.compile(r"`(tests/\w+\.py)::(test_\w+)`")


def table(text: str) -> list[tuple[str, str, str]]:
    """The rows of a Mesos conformance table: (our test's name, status, the whole row)."""
    rows = []
    for line in text.splitlines():
        found = ROW.match(line)
        if found:
            kind, name, status, _ = found.groups()
            short = name.rsplit(".", 1)[-1]  # RoleTreeTest.RolesTracking and the like
            rows.append((f"test_{kind}_{short}", status, line))
    return rows


def test_every_mesos_test_is_ported_or_said_why_not() -> None:
    rows = table((HERE / "MESOS_CONFORMANCE.md").read_text())
    ours = {name for name in globals() if name.startswith(KINDS)}
    ours = {name.removesuffix("_demand") for name in ours}
    applies = [name for name, status, _ in rows if status in ("ported", "differs")]
    assert sorted(ours) == sorted(applies)  # one test for each row that applies


def test_a_test_run_elsewhere_is_named_and_exists() -> None:
    """A row `elsewhere` (the agent's part, run end to end on real processes) names the
    test that runs it, and that test is there."""
    rows = table((HERE / "MESOS_CONFORMANCE.md").read_text())
    for _, status, line in rows:
        if status != "elsewhere":
            continue
        found = ELSEWHERE.search(line)
        assert found, line
        path, name = found.groups()
        assert f"def {name}(" in (HERE.parent / path).read_text(), line


def test_the_docs_list_every_difference_from_the_table() -> None:
    page = HERE.parent / "docs" / "explanation" / "mesos-differences.md"
    section = page.read_text()
    rows = table((HERE / "MESOS_CONFORMANCE.md").read_text())
    assert [line for _, _, line in table(section)] == [
        line for _, status, line in rows if status in ("differs", "n/a")
    ]
