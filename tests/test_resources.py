"""Resource vectors: exact fixed-point arithmetic, shares, and refusal of bad amounts."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from protocol.wire.resources import EMPTY, Limit, ResourceError, Resources

from harness.strategies import RESOURCES


def test_a_million_tasks_added_and_removed_return_to_exactly_zero() -> None:
    task = Resources(cpus=0.1, mem=33.3, disk=0.001)
    total = EMPTY
    for _ in range(1_000_000):
        total = total + task
    assert total["cpus"] == 100_000.0
    assert total.get_millis("mem") == 33_300 * 1_000_000
    for _ in range(1_000_000):
        total = total - task
    assert total == EMPTY
    assert total.is_empty()


def test_floats_would_drift_where_resources_do_not() -> None:
    drift = 0.0
    for _ in range(10):
        drift += 0.1
    assert drift != 1.0  # the reason for fixed point
    r = EMPTY
    for _ in range(10):
        r = r + Resources(cpus=0.1)
    assert r == Resources(cpus=1)


@pytest.mark.parametrize(
    ("amount", "words"),
    [
        (-1, "negative"),
        (math.nan, "finite"),
        (math.inf, "finite"),
        ("2", "number"),
        (True, "number"),
    ],
)
def test_bad_amounts_are_refused_with_a_clear_reason(amount: object, words: str) -> None:
    with pytest.raises(ResourceError, match=words):
        Resources({"cpus": amount})  # type: ignore[dict-item]


def test_a_vector_seen_before_is_taken_as_validated_and_a_bad_one_still_refused() -> None:
    """A message's resources decode to the vector validated the last time the same
    amounts came (a re-registration storm's slaves repeat a few), and what a check
    refuses is refused however close it is to one seen: a bool where 1 was, -1, NaN."""
    wire = TypeAdapter(Resources)
    first = wire.validate_python({"cpus": 1, "mem": 256.0})
    again = wire.validate_python({"cpus": 1, "mem": 256.0})
    assert again is first
    assert again == Resources(cpus=1, mem=256)
    assert wire.validate_python({"cpus": 1.0, "mem": 256}) == first  # (the same amounts)
    for bad in (True, -1, math.nan, "1", [1]):
        with pytest.raises(ValidationError):
            wire.validate_python({"cpus": bad, "mem": 256.0})
    limit = TypeAdapter(Limit).validate_python({"cpus": 1, "mem": 256.0})
    assert type(limit) is Limit  # (a Limit is never given a plain vector seen before)


def test_subtracting_more_than_there_is_is_refused() -> None:
    with pytest.raises(ResourceError, match="not enough"):
        Resources(cpus=1) - Resources(cpus=2)


def test_contains_and_fits() -> None:
    node = Resources(cpus=4, mem=14_000)
    assert node.contains(Resources(cpus=1, mem=10_000))
    assert Resources(cpus=1, mem=10_000).fits(node)
    assert not node.contains(Resources(cpus=1, gpus=1))  # a resource the node lacks
    assert node.contains(EMPTY)


def test_dominant_share_is_the_largest_share_papers_example() -> None:
    total = Resources(cpus=9, mem=18 * 1024)
    a_task = Resources(cpus=1, mem=4 * 1024)
    b_task = Resources(cpus=3, mem=1024)
    assert a_task.dominant_share(total) == pytest.approx(2 / 9)  # memory
    assert b_task.dominant_share(total) == pytest.approx(1 / 3)  # cpu
    shares = a_task.shares(total)
    assert shares == {"cpus": pytest.approx(1 / 9), "mem": pytest.approx(2 / 9)}


def test_parse_the_command_line_form() -> None:
    assert Resources.parse("cpus:2;mem:2200") == Resources(cpus=2, mem=2200)
    assert Resources.parse("cpus:0.5, mem:512") == Resources(cpus=0.5, mem=512)
    with pytest.raises(ResourceError, match="name:amount"):
        Resources.parse("cpus=2")
    with pytest.raises(ResourceError, match="not a number"):
        Resources.parse("cpus:two")
    assert str(Resources(cpus=0.5, mem=512)) == "cpus:0.5;mem:512"


@given(RESOURCES, RESOURCES)
def test_add_then_subtract_is_identity(a: Resources, b: Resources) -> None:
    assert (a + b) - b == a
    assert (a + b).contains(a)
    assert hash(a + b) == hash(b + a)


@given(RESOURCES, st.floats(min_value=0, max_value=1e6))
def test_amounts_keep_three_decimals(r: Resources, x: float) -> None:
    v = Resources(cpus=x)
    assert abs(v.get("cpus", 0.0) - x) <= 0.0005 + 1e-9 * x


@pytest.mark.parametrize(
    ("offered", "hint"),
    [
        ("cpu:2;mem:2200", "did you mean cpus?"),
        ("cpus:2;mems:2200", "did you mean mem?"),
        ("cpus:2;disks:10", "did you mean disk?"),
        ("cpus:2;gpsu:1", "did you mean gpus?"),  # two letters swapped
        ("cpus:2;memory:2200", "known: cpus, mem, disk, gpus"),
    ],
)
def test_a_slave_is_refused_a_resource_name_it_did_not_mean(offered: str, hint: str) -> None:
    """`cpu:2` once registered a slave with 0 cpus and a resource named `cpu`, silently."""
    with pytest.raises(ResourceError, match=re.escape(hint)):
        Resources.parse(offered).check_names()


def test_custom_resources_are_offered_when_declared() -> None:
    Resources.parse("cpus:2;mem:2200;disk:5;gpus:1").check_names()  # the known ones
    Resources.parse("cpus:2;fpgas:1;cpu:3").check_names(["fpgas", "cpu"])  # as Mesos allows


def test_the_slave_command_refuses_a_misspelt_resource_and_offers_a_declared_one(
    tmp_path: Path,
) -> None:
    from click.testing import CliRunner

    from cluster.cli import main

    run = CliRunner().invoke(
        main, ["slave", "--resources", "cpu:2;mem:2200", "--work-dir", str(tmp_path)]
    )
    assert run.exit_code == 2
    assert "unknown resource 'cpu': did you mean cpus?" in run.output
    assert "--custom-resources" in CliRunner().invoke(main, ["slave", "--help"]).output
