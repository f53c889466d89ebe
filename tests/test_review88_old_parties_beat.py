"""review88: a party of a release before the leader's beat is warned at every beat.

The leading master now beats on `<p>/leader` every heartbeat interval. Every slave,
SDK framework and operator tool of an earlier release follows that topic with a
dispatcher that takes `Leader` alone (`protocol.transport.leader` as released): the beat,
sent as a `Heartbeat`, was to each of them a message of a kind it does not take -- a
`bus.unexpected_type` warning and a refusal counted, every interval (17,280 a day at the
default 5 s), for as long as it runs against an upgraded master. Masters are upgraded
first (as Mesos asks, docs/how-to/high-availability.md), and a tenant's framework may
never be.

Fixed: the beat is the leader's announcement sent again, not retained (a `Leader` of
the same master and epoch): a party of an earlier release takes it as the same leader
again and does nothing; a party of this one counts it as the master's beat.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import structlog

from master.master import MasterConfig
from protocol.transport.inbound import Dispatcher
from protocol.transport.leader import LeaderWatch
from protocol.wire.messages import Leader

from harness.helpers import eventually, in_process_cluster, open_transport

CLUSTER = "oldparties"
INTERVAL = 0.2
pytestmark = pytest.mark.timeout(60)


async def test_a_party_that_follows_the_leader_as_released_is_not_warned_by_the_beat(
    tmp_path: Path,
) -> None:
    config = MasterConfig(allocation_interval=0.1, heartbeat_interval=INTERVAL)
    async with contextlib.AsyncExitStack() as stack:
        c = await stack.enter_async_context(in_process_cluster(CLUSTER, tmp_path, config, 1))
        old = await open_transport(stack, c.connect, "old-party")
        announced: list[Leader] = []

        async def on_leader(msg: Leader, _reply_to: str | None) -> None:
            announced.append(msg)

        d = Dispatcher(old, "party")  # (the released LeaderWatch: Leader, and nothing more)
        d.on(Leader, on_leader)
        new = await open_transport(stack, c.connect, "new-party")
        beats = 0

        def beat(_: object) -> None:
            nonlocal beats
            beats += 1

        with structlog.testing.capture_logs() as logs:
            await old.subscribe(c.topics.leader, d)
            await LeaderWatch.on(new, c.topics, None, beat=beat)
            await eventually(lambda: beats >= 3)  # (the master beats: a party hears it)
            await eventually(lambda: bool(announced))
        assert all(a.master_id == c.master.master_id for a in announced)
        assert not [e for e in logs if e["event"] == "bus.unexpected_type"]
        assert not [k for k in old.messages.outcomes if k[1] == "refused"]
