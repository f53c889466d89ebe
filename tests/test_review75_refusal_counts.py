"""Review 75: the sampled refusal lines lose the count of what they left out.

`master.http.log.RefusedLines` (and the bus's `Outbox.refuse`, through
`master.refusal_sampling.RefusalSampling`) log a few refusals a second per principal, or
per client address before credentials, and promise the rest is counted: "each line saying
how many were left out since its last, by event". An operator reads the size of an attack
(a password guessed, a tenant's calls refused) from those counts. Two ways they are never
said:

- a flood that stops: what was left out is told by the sender's *next* line only. A
  tenant (or an address guessing passwords) sending 200 refused requests in a burst and
  then nothing is 20 lines in the log, and the 180 others are said nowhere, ever.
- an address forgotten: past ADDRESSES_KEPT client addresses, the one unheard of longest
  is forgotten with its count (`RefusalSampling.line`: `self.unlogged.pop(forgotten)`).
  Requests from 4,096 other addresses (an IPv6 /64 is 2**64 of them; any host has the
  127/8 of its loopback) drop what a guessing address was not logged for, and its next
  request starts a fresh budget of 20 lines with "unlogged": 0.

What the operator relies on: every refusal is in the log, as a line or in a later line's
count, soon after it.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from test_review72_log_flood import master_log

from master.http.log import ADDRESSES_KEPT, RefusedLines

from harness.helpers import eventually
from harness.mesos import Live, framework_info, live_cluster

FLOOD = 200  # refused requests sent at once, then nothing


class Lines:
    """A logger keeping what was logged."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.lines.append((event, fields))

    def told(self, **of: Any) -> int:
        """Refusals said of the lines whose fields hold `of`: each line, and its count of
        those left out."""
        said = [f for _, f in self.lines if all(f.get(k) == v for k, v in of.items())]
        return sum(1 + f.get("unlogged", 0) for f in said)


def test_an_address_forgotten_among_many_keeps_its_count_of_refusals_left_out() -> None:
    out = Lines()
    refused = RefusedLines(out)
    guesser = "10.0.0.1"
    for _ in range(FLOOD):  # (a password guessed: each answered 401)
        refused.refused("mesos.unauthorized", remote=guesser)
    for i in range(ADDRESSES_KEPT):  # requests from as many other addresses
        refused.refused("mesos.unauthorized", remote=f"10.1.{i // 256}.{i % 256}")
    refused.refused("mesos.unauthorized", remote=guesser)  # it again
    # what was left out is told once the guesser's rate lets it (a second on, as the
    # master's flush does: there is no loop here to run it)
    for _, said, sampled in refused.sampling.due(time.monotonic() + 1.0):
        out.info(**said, **sampled)
    told = out.told(remote=guesser)
    assert told == FLOOD + 1, (
        f"the log says {told} of {FLOOD + 1} refusals of {guesser}: the count of those "
        f"left out was forgotten with the address"
    )


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[Live]:
    async with live_cluster(tmp_path) as cluster:
        yield cluster


async def test_a_burst_of_refused_calls_that_stops_is_all_told_in_the_log(live: Live) -> None:
    b = live.scheduler("team-b")
    try:
        assert await b.subscribe(framework_info("team-b")) == 200
        with master_log() as written:
            for _ in range(FLOOD):  # calls on another stream's id: 400, each
                status, _ = await b.call("REVIVE", {}, stream_id="not-its-stream")
                assert status == 400

            def told() -> int:
                lines = [json.loads(line) for line in written.getvalue().splitlines()]
                said = [
                    f
                    for f in lines
                    if f.get("event") == "mesos.bad_call" and f.get("principal") == "team-b"
                ]
                return sum(1 + f.get("unlogged", 0) for f in said)

            try:
                await eventually(lambda: told() == FLOOD, timeout=15)
            except AssertionError:
                raise AssertionError(
                    f"15 s after team-b's {FLOOD} refused calls, the master's log tells "
                    f"{told()} of them: what sampling left out waits for team-b's next "
                    f"refusal, which need never come"
                ) from None
    finally:
        await b.close()
