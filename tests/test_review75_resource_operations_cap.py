"""Review 75: an ACCEPT's resource operations over their cap are all read before it is
refused.

18ddffb (review 72 #3): "A list over its message's bound (an ACCEPT's tasks and offers, a
RECONCILE's tasks, ...) is refused before any item of it is read". An Accept holds at
most 20 operations besides its launches (`Accept.operations`, max_length 20), but
`_accept_operations` lets through 20 + 1,000 operations of any kind (the 1,000 meant for
LAUNCHes, one task each), and `message_of` then reads every RESERVE, UNRESERVE, CREATE or
DESTROY among them, each of up to 256 resources, before `_wire(Accept, ...)` finds 1,020
of them 1,000 too many. The 1,000 operations past the cap are what review 72 said a
tenant may no longer make the master read.

What a tenant relies on: another's call over a cap costs the master its count, not its
items.
"""

from __future__ import annotations

from typing import Any

import pytest

from master.mesos_api.scheduler_calls import MesosCall, SchedulerCallError, message_of
from protocol import mesos_json as mj


def test_resource_operations_over_the_cap_are_refused_before_any_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read: list[int] = []
    real = mj.resources_from_mesos

    def counted(items: object, field: str = "resources") -> Any:
        read.append(1)
        return real(items, field)

    monkeypatch.setattr(mj, "resources_from_mesos", counted)  # (as scheduler_calls reads it)
    mine = [{"type": "DYNAMIC", "role": "team-a", "principal": "team-a"}]
    cpus = [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}, "reservations": mine}]
    reserve = {"type": "RESERVE", "reserve": {"resources": cpus}}
    call = MesosCall.model_validate(
        {
            "type": "ACCEPT",
            "framework_id": {"value": "f"},
            "accept": {"offer_ids": [{"value": "o"}], "operations": [reserve] * 1020},
        }
    )
    with pytest.raises(SchedulerCallError):
        message_of(call)
    assert not read, f"{len(read)} of 1,020 RESERVE operations were read before the refusal"
