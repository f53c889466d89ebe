"""Review 72: a tenant writes megabytes into the master's log with every call.

The bounds reference promises "The master's log cuts other parties' free text to 400
characters a field, logs a few refusals a second per principal". Two of a tenant's ids
reach the log whole:

- over the Mesos scheduler API, a call naming a framework that is not its own is logged
  (`mesos.bad_call`, at info, every one: no sampling) with the `framework_id` the call
  named, which `protocol.mesos_json.id_value` takes at any length. A tenant posting 1 MiB
  ids writes 1 MiB of the master's log a request, as fast as it can post: its upload
  becomes the master's disk, byte for byte.
- over the bus, a Subscribe naming a framework id of any length is refused (the id is no
  topic segment), and the refusal's line carries `framework_id=msg.framework_id` whole
  (`Subscribe.framework_id` has no bound but the call's 1 MiB); sampled at 5 lines a second,
  that is still 5 MiB of log a second from one tenant.

What a tenant relies on (and an operator): another tenant's calls cost the master's log a
few hundred bytes a field, whatever they carry.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from protocol import logs
from protocol.wire.messages import Subscribe

from harness.mesos import Live, framework_info, live_cluster
from harness.trust import Secure, secure_cluster

HUGE = "f" * 500_000  # an id of half a megabyte (a call is at most 1 MiB)
CALLS = 10
# what CALLS refusals may write at most: a few lines each, each field cut to 400 characters
LOG_BUDGET = CALLS * 8 * 1024


@contextlib.contextmanager
def master_log() -> Iterator[io.StringIO]:
    """The lines logged meanwhile, at the master's own level (info)."""
    written = io.StringIO()
    logs.configure("info", json=True, stream=written)
    try:
        yield written
    finally:
        logs.configure("warning", json=True)  # (as conftest has it)


def assert_bounded(written: io.StringIO, who: str) -> None:
    """What `who`'s CALLS refused calls wrote to the master's log is within LOG_BUDGET."""
    lines = written.getvalue().splitlines() or [""]
    longest = max(lines, key=len)
    event = json.loads(longest).get("event", "?") if longest else ""
    total = len(written.getvalue())
    assert total < LOG_BUDGET, (
        f"{CALLS} calls of {who}'s wrote {total:,} bytes of the master's log, the longest "
        f"line ({event}) {len(longest):,} bytes: the framework id it named, whole"
    )


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[Live]:
    async with live_cluster(tmp_path) as cluster:
        yield cluster


async def test_a_mesos_call_naming_a_huge_framework_id_is_not_logged_whole(live: Live) -> None:
    b = live.scheduler("team-b")
    try:
        assert await b.subscribe(framework_info("team-b")) == 200
        with master_log() as written:
            for _ in range(CALLS):
                status, _ = await b.post({"type": "REVIVE", "framework_id": {"value": HUGE}})
                assert status == 400  # ("Framework cannot be found", as Mesos)
        assert_bounded(written, "team-b")
    finally:
        await b.close()


@pytest.fixture
async def sec(tmp_path: Path) -> AsyncIterator[Secure]:
    async with secure_cluster("memory", tmp_path) as cluster:
        yield cluster


async def test_a_subscribe_naming_a_huge_framework_id_is_not_logged_whole(sec: Secure) -> None:
    mallory = await sec.attacker()
    with master_log() as written:
        for i in range(CALLS):
            error = await mallory.call(
                Subscribe(name="m", role="mallory", inbox=f"i{i}", framework_id=HUGE)
            )
            assert error.code == "subscribe-refused"
    assert_bounded(written, "mallory")
