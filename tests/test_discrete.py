"""Ranges and sets (protocol.wire.discrete): Mesos's text form, clear refusals, the
arithmetic the master's books use, their bounds against a hostile sender, and the
Mesos JSON a pymesos framework reads and sends."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

import protocol.mesos_json as mj
from protocol.mesos_json import MesosJSONError
from protocol.wire.codec import decode, encode
from protocol.wire.discrete import (
    MAX_ITEMS,
    MAX_RANGES,
    Discrete,
    ItemSet,
    Ranges,
    environment,
    parse_resources,
)
from protocol.wire.messages import Offer, TaskInfo
from protocol.wire.resources import ResourceError, Resources

from harness.strategies import RANGES


def test_mesos_text_form_gives_quantities_and_values() -> None:
    r, d = parse_resources("cpus:2;mem:1024;ports:[31000-32000, 8000-8010];zones:{a,b}")
    assert r == Resources(cpus=2, mem=1024, ports=1001 + 11, zones=2)  # counted by size
    assert d["ports"] == Ranges([(8000, 8010), (31000, 32000)])
    assert d["zones"] == ItemSet(["a", "b"])
    assert str(d) == "ports:[8000-8010,31000-32000];zones:{a,b}"
    # overlapping and touching ranges coalesce, as Mesos's values.cpp does
    assert str(Ranges.parse("[5-9, 1-4, 7-12]")) == "[1-12]"
    # Resources.parse reads quantities alone: a range there is refused, saying so
    with pytest.raises(ResourceError, match="is a range or a set: a quantity is a number"):
        Resources.parse("cpus:2;ports:[31000-32000]")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("ports:[32000-31000]", "range [32000-31000] is inverted"),
        ("ports:[31000-32000", "mismatched brackets"),
        ("ports:31000-32000]", "mismatched brackets"),
        ("ports:[a-b]", "expected ranges like [31000-32000], got 'a-b'"),
        ("ports:[1-2-3]", "expected ranges like"),
        ("ports:[-5-3]", "expected ranges like"),
        ("ports:[1-2];ports:[5-6]", "'ports' is given twice"),
        ("zones:{a,b", "mismatched brackets"),
        ("zones:{a b!}", "an item is 1 to 64 letters"),
        ("ports:[1-99999999999999999999]", "is outside [0, 9007199254740991]"),
        ("cpus", "expected name:amount, name:[ranges] or name:{set}"),
        ("cpus:two", "not a number, [ranges] or {set}"),
    ],
)
def test_malformed_text_is_refused_with_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ResourceError, match=re.escape(says)):
        parse_resources(text)


def test_hostile_sizes_are_refused_before_any_work() -> None:
    """100,000 single-port ranges, a set of 10^6 items, a megabyte of text: refused at
    once, not merged or stored."""
    many = ",".join(f"{p}-{p}" for p in range(0, 200_000, 2))
    began = time.perf_counter()
    with pytest.raises(ResourceError, match=f"more than {MAX_RANGES} ranges"):
        Ranges.parse("[" + many[:30_000] + "]")
    with pytest.raises(ResourceError, match="longer than"):
        Ranges.parse("[" + many + "]")
    with pytest.raises(ResourceError, match=f"more than {MAX_ITEMS} items"):
        ItemSet.of(str(i) for i in range(10**6))
    with pytest.raises(ResourceError, match=f"more than {MAX_RANGES} ranges"):
        Ranges.of((p, p) for p in range(0, 200_000, 2))
    assert time.perf_counter() - began < 0.5
    # one huge range is one range: counted by its size, which is bounded
    assert Ranges.parse("[0-4000000000]").size == 4_000_000_001
    with pytest.raises(ResourceError, match="too many"):
        Ranges.parse("[0-9007199254740991]")


def test_a_task_counts_its_values_and_may_not_say_otherwise() -> None:
    t = TaskInfo(
        task_id="t",
        slave_id="s",
        resources=Resources(cpus=1),
        discrete=Discrete({"ports": Ranges([(8000, 8001)])}),
        command={"value": "true"},  # type: ignore[arg-type]
    )
    assert t.resources == Resources(cpus=1, ports=2)
    with pytest.raises(ValidationError, match="ports is 5 but its values"):
        TaskInfo.model_validate(
            {
                "task_id": "t",
                "slave_id": "s",
                "resources": {"cpus": 1, "ports": 5},
                "discrete": {"ports": "[8000-8001]"},
                "command": {"value": "true"},
            }
        )
    with pytest.raises(ValidationError, match="inverted"):
        TaskInfo.model_validate(
            {
                "task_id": "t",
                "slave_id": "s",
                "resources": {"cpus": 1},
                "discrete": {"ports": "[9-1]"},
                "command": {"value": "true"},
            }
        )
    assert decode(encode(t)).message == t  # msgpack both ways


@given(RANGES, RANGES)
def test_range_arithmetic_is_set_arithmetic(a: Ranges, b: Ranges) -> None:
    def values(r: Ranges) -> set[int]:
        return {v for lo, hi in r.spans for v in range(lo, hi + 1)}

    assert values(a.add(b)) == values(a) | values(b)
    assert values(a.subtract(b)) == values(a) - values(b)
    assert a.contains(b) == (values(b) <= values(a))
    assert a.overlaps(b) == bool(values(a) & values(b))
    assert a.size == len(values(a))
    taken = a.take(7)
    assert values(taken) == set(sorted(values(a))[:7])
    assert a.add(b).subtract(b).add(b) == a.add(b)


@given(st.lists(RANGES, max_size=5))
def test_a_union_is_every_value_once(many: list[Ranges]) -> None:
    joined = Discrete.union(Discrete({"ports": r}) for r in many).get("ports", Ranges())
    expected = Ranges()
    for r in many:
        expected = expected.add(r)
    assert joined == expected


def test_a_task_gets_its_ports_as_marathon_names_them() -> None:
    d = Discrete({"ports": Ranges([(8000, 8001), (9000, 9000)])})
    assert environment(d) == {
        "PORT0": "8000",
        "PORT1": "8001",
        "PORT2": "9000",
        "PORTS": "8000,8001,9000",
    }
    assert environment(Discrete()) == {}


def test_mesos_json_carries_ranges_and_sets_both_ways() -> None:
    r, d = parse_resources("cpus:1;ports:[31000-31001,31005-31005];zones:{a}")
    offer = Offer(
        offer_id="o", framework_id="f", slave_id="s", hostname="h", resources=r, discrete=d
    )
    wire = mj.offer_to_mesos(offer, "web")["resources"]
    assert wire[1] == {
        "name": "ports",
        "type": "RANGES",
        "ranges": {"range": [{"begin": 31000, "end": 31001}, {"begin": 31005, "end": 31005}]},
        "role": "*",
        "allocation_info": {"role": "web"},
    }
    assert wire[2]["set"] == {"item": ["a"]}
    assert mj.resources_and_values_from_mesos(wire) == (r, d)
    task = mj.task_from_mesos(
        {
            "task_id": {"value": "t"},
            "agent_id": {"value": "s"},
            "command": {"value": "true"},
            "resources": [
                {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
                {"name": "ports", "type": "RANGES", "ranges": {"range": [{"begin": 5, "end": 6}]}},
            ],
        }
    )
    assert task.discrete == Discrete({"ports": Ranges([(5, 6)])})
    assert task.resources == Resources(cpus=0.1, ports=2)


@pytest.mark.parametrize(
    ("item", "says"),
    [
        ({"name": "ports", "type": "RANGES", "ranges": {"range": [{"begin": 9, "end": 1}]}},
         "inverted"),
        ({"name": "ports", "type": "RANGES", "ranges": {"range": [{"begin": "9", "end": 10}]}},
         "integers"),
        ({"name": "ports", "type": "RANGES", "ranges": {}}, "needs ranges.range"),
        ({"name": "ports", "type": "RANGES",
          "ranges": {"range": [{"begin": p, "end": p} for p in range(0, 200_000, 2)]}},
         "more than 1024 ranges"),
        ({"name": "zones", "type": "SET", "set": {"item": [str(i) for i in range(10**6)]}},
         "more than 1024 items"),
        ({"name": "x", "type": "TEXT"}, "SCALAR, RANGES and SET exist here"),
    ],
)  # fmt: skip
def test_bad_mesos_json_is_refused_with_what_is_wrong(item: dict[str, object], says: str) -> None:
    with pytest.raises(MesosJSONError, match=re.escape(says)):
        mj.resources_and_values_from_mesos([item])


def test_one_port_under_two_names_is_refused_and_reserved_ports_are_ports() -> None:
    """A port is one resource, whoever's: ranges of `ports` and `ports(svc)` may not
    share one, and a task given reserved ports finds them as PORT0..., as any others."""
    with pytest.raises(ResourceError, match="overlap"):
        parse_resources("cpus:1;ports(svc):[31000-31010];ports:[31005-31020]")
    _, task = parse_resources("ports(svc):[8000-8000];ports:[31000-31000]")
    assert environment(task) == {"PORT0": "8000", "PORT1": "31000", "PORTS": "8000,31000"}


def test_a_slave_offers_the_default_ports_unless_it_names_ports_reserved_or_not() -> None:
    from slave.probe import slave_resources

    _, values = slave_resources("cpus:1;mem:64")
    assert values == Discrete({"ports": Ranges([(31000, 32000)])})
    offered, values = slave_resources("cpus:1;mem:64;ports(svc):[31000-31010]")
    assert values == Discrete({"ports(svc)": Ranges([(31000, 31010)])})  # and no default
    assert offered["ports(svc)"] == 11
    assert "ports" not in offered


def test_the_slave_command_offers_ports_by_default_and_refuses_a_bad_range(
    tmp_path: Path,
) -> None:
    from click.testing import CliRunner

    from cluster.cli import main

    run = CliRunner().invoke(
        main, ["slave", "--resources", "cpus:2;ports:[32000-31000]", "--work-dir", str(tmp_path)]
    )
    assert run.exit_code == 2
    assert "range [32000-31000] is inverted" in run.output
    run = CliRunner().invoke(
        main, ["slave", "--resources", "cpus:2;port:[1-2]", "--work-dir", str(tmp_path)]
    )
    assert run.exit_code == 2
    assert "unknown resource 'port': did you mean ports?" in run.output
