"""The allocation package is the pure core: it loads no I/O and no wire type, and the
allocator reaches the role order only through the `RoleOrder` interface. The offer cycle
(`master.cycle`), which the master and the simulator drive it through, is as pure, and
of the master it knows only the allocation package."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from master.allocation.allocator import Allocator
from master.allocation.role_order import RoleOrder
from master.allocation.role_tree import RoleTree
from master.allocation.sorter import Sorter, Total
from protocol.wire.resources import Resources

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "master" / "allocation"

# libraries that talk to the world (or bring an event loop), and our wire format
IO = {
    "asyncio", "socket", "ssl", "selectors", "subprocess", "aiomqtt", "paho", "aiohttp",
    "amqtt", "kazoo", "prometheus_client", "structlog", "logging", "matplotlib", "msgpack",
    "pydantic", "pydantic_core", "yaml",
}  # fmt: skip
WIRE = {
    "protocol.wire.messages",
    "protocol.wire.codec",
    "protocol.transport.bus",
    "protocol.wire.topics",
}

LOAD_ALL = """
import importlib, json, pkgutil, sys
before = set(sys.modules)
package = importlib.import_module("{package}")
for info in pkgutil.walk_packages(package.__path__, "{package}."):
    importlib.import_module(info.name)
print(json.dumps(sorted(set(sys.modules) - before)))
"""


@pytest.mark.parametrize(
    ("package", "core"),
    [
        ("master.allocation", "master.allocation.allocator"),
        ("master.cycle", "master.cycle.offer_cycle"),
    ],
)
def test_importing_the_pure_packages_loads_no_io_library_and_no_wire_type(
    package: str, core: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", LOAD_ALL.format(package=package)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout))
    assert core in loaded  # (it did load the package)
    assert not {m for m in loaded if m.split(".")[0] in IO}
    assert not loaded & WIRE
    # of the master, only the pure packages: no books, no shell, no bus
    assert {m for m in loaded if m.startswith("master.")} <= {
        m for m in loaded if m.startswith(("master.allocation", "master.cycle"))
    }


def test_the_allocator_never_asks_which_role_order_it_has() -> None:
    source = (PACKAGE / "allocator.py").read_text()
    calls = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance"
    ]
    assert not calls


@pytest.mark.parametrize("order", [Sorter("drf", Total()), RoleTree("hdrf", Total())])
def test_both_role_orders_are_role_orders(order: RoleOrder) -> None:
    # every verb of the interface, as the allocator calls it
    for name in RoleOrder.__dict__:
        if not name.startswith("_") or name == "__contains__":
            assert hasattr(order, name), name
    order.set_weight("eng", 3.0)
    assert order.weight("eng") == 3.0  # a configured weight, before the role has frameworks
    order.add("eng")
    order.activate("eng")
    assert order.wanting("eng")
    assert list(order.sort()) == ["eng"]
    order.allocated("eng", Resources(cpus=2))
    assert order.held("eng") == {"cpus": 2000}
    assert order.held("nobody") == {}
    order.unallocated("eng", Resources(cpus=2))
    assert order.held("eng") == {}
    order.deactivate("eng")
    assert not order.wanting("eng")


def test_flat_and_tree_allocators_answer_the_same_questions_about_flat_roles() -> None:
    """Roles side by side under drf and as a tree's top-level leaves under hdrf: the
    allocator answers through the interface alike where the two agree."""
    for policy in ("drf", "hdrf"):
        a = Allocator(policy)
        a.roles.set_weight("b", 2.0)
        a.add_framework("f1", role="a")
        a.add_framework("f2", role="b")
        a.add_slave("s1", Resources(cpus=4, mem=1024))
        assert a.roles.weight("b") == 2.0
        assert a.roles.weight("unknown") == 1.0
        assert a.roles.pool_weights() == {"a": 1.0, "b": 2.0}
        assert [v.role for v in a.roles.views()] == ["a", "b"]
        assert a.roles.problem("a") is None
        assert (a.roles.promise("a") is None) == (policy == "drf")
        assert a.roles.is_tree() == (policy == "hdrf")
