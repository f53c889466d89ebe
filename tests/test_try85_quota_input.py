"""Try 85: what an operator's quota call may name. A huge amount is refused as other bad
input is (a 400), not a 500 with a traceback; the default role `*` and reserved
resources have no quota, as in Mesos (quota.md: "Quota is not allowed for the default
role '*'" (MESOS-3938); a quota request with reserved resources is a 400)."""

from __future__ import annotations

import contextlib

import pytest
from pydantic import ValidationError

from protocol.wire.messages import Error
from protocol.wire.operator import SetQuota, SetQuotas
from protocol.wire.resources import ResourceError, Resources

from harness.helpers import Inbox, eventually
from harness.master import Cluster, T


def test_a_huge_amount_is_a_resource_error() -> None:
    """`drfmesos quota set x --guarantee cpus:1e308` ends in an OverflowError traceback,
    and UPDATE_QUOTA with {"cpus": {"value": 1e308}} is answered 500: the operator API
    catches ValidationError, which an OverflowError is not."""
    with pytest.raises(ResourceError):
        Resources(cpus=1e308)


def test_update_quota_with_a_huge_amount_is_a_validation_error() -> None:
    with pytest.raises(ValidationError):
        SetQuotas.model_validate({"quotas": [{"role": "a", "guarantee": {"cpus": 1e308}}]})


async def _refused(quota: SetQuota) -> Error | None:
    """What the master answers an operator's SetQuotas of `quota`: its Error, or None
    if it set it."""
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        await c.start_master()
        ops = await stack.enter_async_context(
            c.connect(name="ops", inbox=T.outbox("operator", "ops"), will=None)
        )
        inbox = Inbox()
        await ops.subscribe(T.outbox("operator", "ops"), inbox)
        await ops.publish(T.inbound("operator", "ops"), SetQuotas(quotas=[quota]))
        master = c.master
        await eventually(
            lambda: bool(inbox.of(Error)) or quota.role in master.allocator.quotas, 10.0
        )
        errors = inbox.of(Error)
        return errors[0] if errors else None


async def test_the_default_role_has_no_quota() -> None:
    """UPDATE_QUOTA {"role": "*", "guarantees": {"cpus": {"value": 1}}} was answered 200,
    and `drfmesos quota set '*' --guarantee cpus:1` said "quota of * set"."""
    assert await _refused(SetQuota(role="*", guarantee=Resources(cpus=1))) is not None


async def test_a_quota_of_reserved_resources_is_refused() -> None:
    """SET_QUOTA whose guarantee has `reservations: [{role: b}]`, or `drfmesos quota set x
    --guarantee 'cpus(x):1'`, set a quota of `cpus(x)`: written to the roles file as such,
    and GET_QUOTA shows it as a STATIC reservation's guarantee."""
    quota = SetQuota(role="x", guarantee=Resources.parse("cpus(x):1"))
    assert await _refused(quota) is not None
