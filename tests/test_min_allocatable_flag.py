"""The master's --min-allocatable-resources, in Mesos's --min_allocatable_resources form."""

from __future__ import annotations

import click
import pytest

from master.cli import parse_min_allocatable
from protocol.wire.resources import Resources


def test_sets_of_quantities_separated_by_bars() -> None:
    assert parse_min_allocatable("cpus:0.5;mem:64|gpus:1") == [
        Resources(cpus=0.5, mem=64),
        Resources(gpus=1),
    ]
    assert parse_min_allocatable(None) is None  # Mesos's default
    assert parse_min_allocatable("") == []  # anything
    assert parse_min_allocatable("*") == []


@pytest.mark.parametrize("bad", ["cpu:1", "cpus:x", "cpus"])
def test_a_typo_is_refused_with_its_reason(bad: str) -> None:
    with pytest.raises(click.BadParameter, match="cpu"):
        parse_min_allocatable(bad)
