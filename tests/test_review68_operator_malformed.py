"""Review 68: malformed resources in an operator's RESERVE_RESOURCES or CREATE_VOLUMES
(a reservation's `labels.labels` a number, a volume's `disk.volume` not an object) are
answered 500, where the Mesos API reference says "A malformed or unknown call is a 400
... with {"error": ...} saying why". `mesos_reservations.identity_of` and
`_reservation_of` raise TypeError / AttributeError on such a field, which
`OperatorApi._operate` does not catch (the scheduler API's ACCEPT wraps the same parse
in `_read`, and answers 400).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from protocol.wire.resources import Resources

from harness.mesos import Live, live_cluster

R = Resources.parse

LABELS_A_NUMBER = {
    "name": "cpus",
    "type": "SCALAR",
    "scalar": {"value": 1},
    "reservations": [
        {"type": "DYNAMIC", "role": "team-a", "principal": "ops", "labels": {"labels": 5}}
    ],
}
VOLUME_A_STRING = {
    "name": "disk",
    "type": "SCALAR",
    "scalar": {"value": 64},
    "reservations": [{"type": "DYNAMIC", "role": "team-a", "principal": "ops"}],
    "disk": {"persistence": {"id": "v1"}, "volume": "data"},
}


async def call(live: Live, body: dict[str, Any]) -> tuple[int, str]:
    """A v1 operator call as ops: (status, the answer's text)."""
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            live.web + "api/v1",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": live.auth("ops")},
        ) as r,
    ):
        return r.status, await r.text()


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[Live]:
    async with live_cluster(tmp_path, R("cpus:4;mem:1024;disk:4096"), simulated=True) as c:
        yield c


@pytest.mark.parametrize(
    ("kind", "inner", "resource"),
    [
        ("RESERVE_RESOURCES", "resources", LABELS_A_NUMBER),
        ("CREATE_VOLUMES", "volumes", VOLUME_A_STRING),
    ],
)
async def test_malformed_resources_in_an_operator_call_are_a_400(
    live: Live, kind: str, inner: str, resource: dict[str, Any]
) -> None:
    assert live.master is not None
    before = live.master.books.slaves["s0"].total
    body = {"agent_id": {"value": "s0"}, inner: [resource]}
    status, text = await call(live, {"type": kind, kind.lower(): body})
    assert status == 400, f"answered {status}: {text!r}"
    assert "error" in json.loads(text)
    assert live.master.books.slaves["s0"].total == before
