"""Review 68: an operator's RESERVE_RESOURCES that names another principal in the
reservation is applied in that principal's name.

The reservations reference says "Identity is the caller's ...; a principal named in a
payload is checked against it" and "the principal is always the caller's ..., never one
named in the operation" (Mesos's master refuses a RESERVE whose reservation principal
differs from the authenticated one). Here `claimed` fills in the caller only where no
principal is named: operator `ops` reserves `cpus(team-a,team-a)`, which reads as made by
tenant team-a, and team-a's framework may then UNRESERVE it (a framework "unreserves only
what its principal reserved"): an audit trail forged, and a reservation an operator meant
to keep handed to a tenant to give away.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from protocol.mesos_json import resources_to_mesos
from protocol.wire.resources import Resources

from harness.mesos import Live, live_cluster, operator_call

R = Resources.parse


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[Live]:
    async with live_cluster(tmp_path, R("cpus:4;mem:1024;disk:4096"), simulated=True) as c:
        yield c


async def reserve(live: Live, text: str) -> tuple[int, Any]:
    body = {"agent_id": {"value": "s0"}, "resources": resources_to_mesos(R(text))}
    return await operator_call(live, {"type": "RESERVE_RESOURCES", "reserve_resources": body})


async def test_an_operator_reserves_in_no_other_principals_name(live: Live) -> None:
    assert live.master is not None
    # in its own name (the principal left out, or its own): applied
    status, _ = await reserve(live, "cpus(team-a,ops):1")
    assert status == 200
    # in a tenant's name: refused, nothing changed
    before = live.master.books.slaves["s0"].total
    status, answer = await reserve(live, "cpus(team-a,team-a):1")
    after = live.master.books.slaves["s0"].total
    assert "cpus(team-a,team-a)" not in after.millis, (
        f"ops reserved in team-a's name: {after} (answered {status} {answer})"
    )
    assert status == 400
    assert after == before
