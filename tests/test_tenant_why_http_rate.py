""" "why?" over HTTP is under the asker's rate limit, as the how-to says: "Questions
are calls like any other, under the asker's rate limit" (docs/how-to/why-no-offers.md,
"What it costs").

Over the bus an `AskWhy` is a call: it waits in its principal's queue (qps, capacity)
and past the capacity is refused. Before its fix `GET /api/v1/frameworks/{framework}/why`, which a
framework principal may call (master/http/api.py `_guard` lets `_why` through),
went straight to `MasterViews.why_of` (master/http/read_side.py:178) -> `WhyAnswers.find`
(a scan of every framework) and `answer`, on the master's loop, as often as the tenant
sent it: its principal's limit (here 1 call a second, a queue of 2) held nothing.
(Beside this, an unknown name costs a scan of every framework and spends no budget.)"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from pathlib import Path

import aiohttp

from cluster.local.secure import provision
from frameworks.driver import SchedulerDriver
from master.cli import rate_limits
from master.http.config import HttpConfig
from master.master import MasterConfig
from protocol.transport.memory import MemoryBroker
from protocol.wire.topics import Topics

from harness.helpers import Recorder, basic, eventually, start_master

CLUSTER = "review53http"
PRINCIPALS = [("master", "master"), ("ops", "operator"), ("alice", "framework")]
QPS, CAPACITY, ASKED = 1.0, 2, 40


async def test_a_tenants_http_questions_of_why_are_held_to_its_rate_limit(
    tmp_path: Path,
) -> None:
    store = provision(tmp_path / "auth", PRINCIPALS)
    broker, topics = MemoryBroker(store.principals.values()), Topics(CLUSTER)
    config = MasterConfig(
        allocation_interval=0.1,
        principals=store.principals_file,
        rate_limits=rate_limits(None, QPS, CAPACITY),
        http=HttpConfig(port=0, credentials=store.path),
    )
    async with contextlib.AsyncExitStack() as stack:
        master = await start_master(stack, broker.connector("master"), topics, config)
        driver = SchedulerDriver(
            Recorder(), name="alices", broker=broker.connector("alice"), cluster=CLUSTER
        )
        await driver.start()
        try:
            await eventually(lambda: driver.framework_id is not None and bool(master.web_ui))
            auth = basic("alice", store.secret_file("alice").read_text().strip())
            url = f"{master.web_ui}api/v1/frameworks/{driver.framework_id}/why"
            async with aiohttp.ClientSession(headers={"Authorization": auth}) as session:

                async def ask() -> int:
                    async with session.get(url) as r:
                        await r.read()
                        return r.status

                statuses = Counter(await asyncio.gather(*(ask() for _ in range(ASKED))))
        finally:
            driver.stop()
            await driver.join()
    # 40 questions within a second, at 1 a second with a queue of 2: most are refused
    # (429, as the Mesos API's door answers a principal past its capacity), as AskWhy is
    assert statuses[200] <= CAPACITY + 2, f"answered {dict(statuses)}"
