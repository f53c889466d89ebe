"""Review 75: on a master without credentials, one framework's big Mesos calls make every
other framework's big calls wait behind all of its own.

`BigBodies` (master.mesos_api.scheduler_http) reads a body over READ_INLINE_BYTES in a
thread, "one of each principal's at a time (its others wait for it)", two in all, so that
one tenant posting many keeps nobody else from their turn. With credentials that holds
(below: team-b's call waits for a read or two of team-a's, not for all of them).

Without credentials the master still tells Mesos frameworks apart by the principal their
FrameworkInfo claims (`SchedulerApi._insecure_principal`: their rate limits, roles and
quotas are that principal's), but `SchedulerApi.handle` keys every body's turn by
INSECURE_PRINCIPAL ("mesos"), before the call is read, and `_call` again for the message:
every framework of the cluster shares one turn, a FIFO lock. A framework with two dozen big
calls in flight (a Spark or a batch service launching 1,000 tasks an ACCEPT from several
threads) makes another framework's RECONCILE wait for all of their readings, one at a time,
while the second thread stands idle.

What a Mesos framework relies on: its call waits for the reading of a call or two of
another framework's, not for every call the other has in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.mesos_client import MesosScheduler
from master.http.config import HttpConfig
from master.master import Master, MasterConfig
from master.mesos_api.doors import mesos_doors
from master.mesos_api.scheduler_http import (
    BIG_BODIES_A_PRINCIPAL,
    READ_INLINE_BYTES,
    SchedulerApi,
)
from protocol.transport.memory import MemoryBroker
from protocol.wire.topics import Topics

from harness.helpers import eventually, open_transport
from harness.mesos import Live, framework_info, live_cluster

BODY = 1024 * 1024  # the most a call may be
IN_FLIGHT = 24  # team-a's big calls posted at once


def costly_accept(framework_id: str) -> bytes:
    """An ACCEPT within the caps whose every task is read (1,000 tasks of 50 single
    ports), refused in the end for an operation this master does not serve."""
    ports = [{"begin": 31000 + 2 * i, "end": 31000 + 2 * i} for i in range(50)]
    task: dict[str, Any] = {
        "name": "",
        "agent_id": {"value": "s0"},
        "resources": [
            {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.001}},
            {"name": "ports", "type": "RANGES", "ranges": {"range": ports}},
        ],
        "command": {"value": "x"},
    }
    n = min(1000, (BODY - 2048) // (len(json.dumps(task)) + 30))
    tasks = [{**task, "task_id": {"value": f"t{i}"}} for i in range(n)]
    call = {
        "type": "ACCEPT",
        "framework_id": {"value": framework_id},
        "accept": {
            "offer_ids": [{"value": "o-1"}],
            "operations": [
                {"type": "LAUNCH", "launch": {"task_infos": tasks}},
                {"type": "CREATE_DISK"},  # (Mesos 1.7's: not served here)
            ],
        },
    }
    body = json.dumps(call).encode()
    assert READ_INLINE_BYTES < len(body) < BODY
    return body


def big_reconcile() -> dict[str, Any]:
    """A RECONCILE of 1,000 tasks (over READ_INLINE_BYTES: read in a thread)."""
    tasks = [
        {"task_id": {"value": f"service-{i:06d}-replica"}, "agent_id": {"value": "s0"}}
        for i in range(1000)
    ]
    assert len(json.dumps(tasks)) > READ_INLINE_BYTES
    return {"tasks": tasks}


async def timed(coro: Any) -> tuple[Any, float]:
    start = time.monotonic()
    got = await coro
    return got, time.monotonic() - start


def waiting(master: Master) -> int:
    """Big bodies waiting for their turn or read, in all."""
    assert master.http is not None
    [api] = [d for d in master.http.doors if isinstance(d, SchedulerApi)]
    return sum(api.bodies._waiting.values())


async def race(master: Master, auth_a: str | None, auth_b: str | None) -> tuple[float, float]:
    """(one of team-a's costly calls alone, team-b's RECONCILE among IN_FLIGHT of them),
    in seconds."""
    web = master.web_ui
    a, b = MesosScheduler(web, auth_a), MesosScheduler(web, auth_b)
    try:
        assert await a.subscribe(framework_info("team-a")) == 200
        assert await b.subscribe(framework_info("team-b")) == 200
        body = costly_accept(a.framework_id)
        (status, _), alone = await timed(a.post(None, raw=body))
        assert status == 400
        flood = [asyncio.ensure_future(a.post(None, raw=body)) for _ in range(IN_FLIGHT)]
        # team-a's are in, waiting for their turns (as many as a principal may have: the
        # rest refused), when team-b's comes
        await eventually(lambda: waiting(master) >= BIG_BODIES_A_PRINCIPAL, interval=0.001)
        (status, _), waited = await timed(b.call("RECONCILE", big_reconcile()))
        assert status == 202
        await asyncio.gather(*flood)
        return alone, waited
    finally:
        await a.close()
        await b.close()


@contextlib.asynccontextmanager
async def insecure_master() -> AsyncIterator[Master]:
    """A master serving the Mesos APIs without credentials (as `drfmesos master --http`
    without --principals)."""
    broker, topics = MemoryBroker(), Topics("insecure")
    async with contextlib.AsyncExitStack() as stack:
        config = MasterConfig(allocation_interval=0.1, http=HttpConfig(port=0))
        bus = await open_transport(stack, broker.connector("master"), "master")
        master = Master(bus, topics, config)
        master.http_doors.extend(mesos_doors(master))
        await master.start()
        stack.push_async_callback(master.stop)
        await eventually(lambda: bool(master.web_ui))
        yield master


def assert_not_behind_all(alone: float, waited: float) -> None:
    # a read or two of team-a's (and its own), with room for a busy machine; not all
    # IN_FLIGHT of them, one after the other
    bound = 4 * alone + 0.5
    assert waited < bound, (
        f"team-b's RECONCILE waited {waited:.2f} s behind team-a's {IN_FLIGHT} calls in "
        f"flight (one of them is read in {alone:.2f} s): over {bound:.2f} s"
    )


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[Live]:
    async with live_cluster(tmp_path) as cluster:
        yield cluster


async def test_with_credentials_a_tenants_big_calls_wait_for_few_of_anothers(live: Live) -> None:
    """(What held) one turn a principal: team-b is not behind all of team-a's."""
    assert live.master is not None
    alone, waited = await race(live.master, live.auth("team-a"), live.auth("team-b"))
    assert_not_behind_all(alone, waited)


async def test_without_credentials_a_frameworks_big_calls_wait_for_few_of_anothers() -> None:
    async with insecure_master() as master:
        alone, waited = await race(master, None, None)
    assert_not_behind_all(alone, waited)
