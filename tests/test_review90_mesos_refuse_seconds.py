"""Review 90: a Mesos scheduler's DECLINE or ACCEPT whose `refuse_seconds` is out of
our range was refused whole (400), where Mesos takes the call.

What Mesos does. `HierarchicalAllocatorProcess::recoverResources` caps a filter longer
than 365 days at 365 days ("Using 365 days to create the refused resources offer filter
because the input value is too big"), and a negative one is its default, 5 s ("Using the
default value of 'refuse_seconds' ... because the input value is negative"). The call
itself always goes through: the offer is declined, or the tasks launched.

What drfmesos did. `Filters.refuse_seconds` is `0 <= x <= 365 days`, and the Mesos
API's call parser validated the scheduler's value against it: `refuse_seconds: 1e10`
(a scheduler's "never again") or `-1` made the DECLINE a 400, so the offer stayed
outstanding (no offer timeout by default: held from everyone), or made the ACCEPT a 400,
so its tasks never launched.
"""

from __future__ import annotations

from typing import Any

import pytest

from master.mesos_api.scheduler_calls import message_of, parse_call
from protocol.wire.messages import Accept, Decline

YEAR = 365 * 24 * 3600.0


def call(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "framework_id": {"value": "fw-1"}, kind.lower(): body}


@pytest.mark.parametrize(("asked", "kept"), [(1e10, YEAR), (YEAR + 1, YEAR), (-1, 5.0), (0, 0.0)])
def test_a_decline_takes_any_refuse_seconds_as_mesos_does(asked: float, kept: float) -> None:
    body = {"offer_ids": [{"value": "o"}], "filters": {"refuse_seconds": asked}}
    decline = message_of(parse_call(call("DECLINE", body)))
    assert isinstance(decline, Decline)
    assert decline.filters.refuse_seconds == kept


def test_an_accept_with_a_filter_of_forever_launches_all_the_same() -> None:
    body = {"offer_ids": [{"value": "o"}], "operations": [], "filters": {"refuse_seconds": 1e12}}
    accept = message_of(parse_call(call("ACCEPT", body)))
    assert isinstance(accept, Accept)
    assert accept.filters.refuse_seconds == YEAR
