"""A rate limits file that names a principal the credentials store does not know (a
misspelt name, or one not added yet) limits nobody: the master says so once, at start
(newcomer89: nothing was said)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import structlog

from cluster.local.secure import provision
from master.master import MasterConfig
from master.rate_limits import load_rate_limits
from protocol.transport.memory import MemoryBroker
from protocol.wire.topics import Topics

from harness.helpers import start_master

PRINCIPALS = [("master", "master"), ("alice", "framework"), ("bob", "framework")]


async def start_with_limits(tmp_path: Path, named: list[str]) -> list[dict[str, object]]:
    """What a master with limits for `named` logs as it starts."""
    store = provision(tmp_path / "auth", PRINCIPALS)
    limits_file = tmp_path / "limits.json"
    limits_file.write_text(json.dumps({"limits": [{"principal": p, "qps": 5} for p in named]}))
    config = MasterConfig(
        principals=store.principals_file, rate_limits=load_rate_limits(limits_file, None, None)
    )
    broker = MemoryBroker(store.principals.values())
    with structlog.testing.capture_logs() as said:
        async with contextlib.AsyncExitStack() as stack:
            await start_master(stack, broker.connector("master"), Topics("limits"), config)
    return said


async def test_a_limit_for_a_principal_nobody_is_said_at_start(tmp_path: Path) -> None:
    said = await start_with_limits(tmp_path, ["alice", "alcie", "carol"])
    warned = [e for e in said if e["event"] == "master.rate_limits_unknown_principals"]
    assert len(warned) == 1
    assert warned[0]["principals"] == ["alcie", "carol"]
    assert warned[0]["log_level"] == "warning"


async def test_limits_for_known_principals_say_nothing(tmp_path: Path) -> None:
    said = await start_with_limits(tmp_path, ["alice", "bob"])
    assert not [e for e in said if e["event"] == "master.rate_limits_unknown_principals"]
