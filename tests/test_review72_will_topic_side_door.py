"""Review 72: a tenant's Last Will topic is a way into the master around every bound of its
intake.

The broker's ACL lets each framework principal write `<p>/gone/framework/<its name>` (its
connection's Last Will is published there), and the master reads every payload that
arrives there (`Master._gone_arrives` -> `CallIntake.arrive_gone` -> `Master._gone`). A
tenant may publish there itself, any time, any payload the broker carries (8 MiB). What
its calls go through on `in/framework/<name>` (`master.intake`, docs/reference/bounds.md)
none of it meets:

- no admission: `arrive_gone` queues the payload without `over_capacity`, so past its
  rate limit's capacity nothing is refused, and what waits is held in the master's memory
  however much it is;
- no rate limit (`limited=False`: "not a call: not counted");
- no bounds of a call: `_gone` decodes it with `decode_many(payload)`, 16 MiB a message and
  no cap on items, where a call is 1 MiB a message and 4,096 calls and items a payload;
- and on the loop: a call's payload over 64 KiB is decoded in a thread, this one in the
  master's event loop, every message of it validated whatever its type (only `Gone`s are
  then used).

One 8 MiB payload of Accepts (123 of 1,000 tiny tasks each) published to mallory's own will
topic held the master's loop 2.3 s of CPU in one step (on mosquitto and in memory) on the
2-core test machine: every other tenant's call, every slave's heartbeat and update, every
allocation round and the HTTP API waited. One a few seconds keeps the master stalled for
as long as the tenant likes; sent faster, they queue in the master's memory without end.

What a tenant relies on: another tenant's publishes cost the master what its calls may
cost (bounds.md: "`GET /health` keeps answering while any one message is handled").
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from protocol.wire.codec import MAX_MESSAGE_BYTES, encode, encode_batch
from protocol.wire.messages import Accept, CommandInfo, Reconcile, TaskInfo
from protocol.wire.resources import Resources

from harness.helpers import longest_step
from harness.trust import Secure, T, secure_cluster

pytestmark = pytest.mark.timeout(120)
# seconds of CPU one step of the master's loop may take for a tenant's hostile payload: the
# bound tests/test_tenant.py holds the call topic to (a call's big payload is decoded in a
# thread, and handled in slices of 64 calls)
STEP_BOUND = 0.1
BROKER_PACKET = 8 * 1024 * 1024  # what the brokers we start carry in one message


def heavy_payload() -> bytes:
    """A batch of Accepts (1,000 tiny tasks each) under the brokers' 8 MiB."""
    task = Resources(cpus=0.001)
    accept = encode(
        Accept(
            framework_id="f",
            offer_ids=["o"],
            tasks=[
                TaskInfo(
                    task_id=f"t{i}", slave_id="s", resources=task, command=CommandInfo(value="x")
                )
                for i in range(1000)
            ],
        )
    )
    payload = encode_batch([accept] * ((BROKER_PACKET - 64 * 1024) // len(accept)))
    assert len(payload) < min(BROKER_PACKET, MAX_MESSAGE_BYTES)
    return payload


@pytest.fixture(params=["memory", "mosquitto"])
async def sec(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Secure]:
    """On the memory broker (the store's ACL), and on mosquitto with the ACL it is given."""
    async with secure_cluster(request.param, tmp_path) as cluster:
        yield cluster


async def test_a_tenants_will_topic_holds_the_master_no_longer_than_its_calls(
    sec: Secure,
) -> None:
    mallory = await sec.attacker()
    payload = heavy_payload()
    will = T.gone("framework", "mallory")
    with longest_step() as longest:
        await mallory.bus.publish_raw(will, payload)
        # a call of mallory's behind it in its queue: answered once the payload was handled
        error = await mallory.call(Reconcile(framework_id="fw-none"))
    assert error.code == "unknown-framework"
    assert longest[0] < STEP_BOUND, (
        f"one payload of {len(payload):,} bytes mallory published on its own will topic "
        f"({will}) held the master's event loop {longest[0]:.2f} s in one step"
    )
