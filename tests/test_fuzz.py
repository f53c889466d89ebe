"""A short run of the tenant fuzzer (tests/fuzz.py) on a secured cluster with real
processes; `python -m benchmarks.fuzz` runs it for long.

The invariants: no sandbox outside a work dir, no process the master's books do not
count, no slave past its total, no handler failure, no loop step past 100 ms, and the
victim's task runs on throughout.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.fuzz_attack import fuzz
from harness.trust import Secure, secure_cluster


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Secure]:
    async with secure_cluster("mosquitto", tmp_path, simulated=False) as sec:
        yield sec


async def test_a_fuzzing_tenant_breaks_no_invariant(cluster: Secure, tmp_path: Path) -> None:
    await fuzz(cluster, tmp_path, messages=3000, requests=150, seed=36)
