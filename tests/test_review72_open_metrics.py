"""Review 72: `--http-open-metrics` shows anybody who can reach the master every tenant's
framework ids, names and roles, and their principals' names.

The master keeps one tenant from learning which frameworks, and whose, exist: another
principal's framework id is answered as one nobody has, why-no-offers counts the
frameworks ahead instead of naming them, and the HTTP side checks a wrong secret so that
"neither time nor a 429 tells which names are principals" (docs/reference/http-api.md).
`--http-open-metrics` is there for Prometheus ("leaves /metrics and /health open for
scrapers"), and /metrics labels each framework's share with its `framework_id`, `name`
and `role` (`drfmesos_framework_dominant_share`), each task's usage with its framework
and task ids, and each principal's calls with its name (`drfmesos_calls_*`). With it on,
a tenant (or anybody on the network: no credentials are asked) reads the whole list: who
the other tenants are, their frameworks, what they are named, how much they hold and how
busy they are. Neither the flag's help nor the docs say that the page carries them.

What a tenant relies on: the list of other tenants' frameworks and principals is
operators' to read, or the operator is told it is not.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from cluster.local.secure import provision
from master.http.config import HttpConfig
from master.master import Master, MasterConfig
from master.mesos_api.doors import mesos_doors
from protocol.transport.memory import MemoryBroker
from protocol.wire.topics import Topics

from harness.helpers import eventually, open_transport, start_secure_slaves
from harness.mesos import PRINCIPALS, Live, framework_info


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[Live]:
    """A master with the Mesos APIs and slave-0, its /metrics and /health left open."""
    store = provision(tmp_path / "auth", PRINCIPALS)
    broker, topics = MemoryBroker(store.principals.values()), Topics("metrics")
    async with contextlib.AsyncExitStack() as stack:
        config = MasterConfig(
            allocation_interval=0.1,
            principals=store.principals_file,
            http=HttpConfig(port=0, credentials=store.path, open_metrics=True),
        )
        bus = await open_transport(stack, broker.connector("master"), "master")
        master = Master(bus, topics, config)
        master.http_doors.extend(mesos_doors(master))
        await master.start()
        stack.push_async_callback(master.stop)
        await start_secure_slaves(stack, broker.connector, topics, tmp_path, [("slave-0", "s0")])
        await eventually(lambda: len(master.books.slaves) == 1 and bool(master.web_ui))
        yield Live(store, master.web_ui, master)


async def test_open_metrics_name_no_tenants_framework_or_principal(live: Live) -> None:
    a = live.scheduler("team-a")
    try:
        assert await a.subscribe({**framework_info("team-a"), "name": "secret-merger-model"}) == 200
        async with aiohttp.ClientSession() as anybody, anybody.get(live.web + "metrics") as r:
            assert r.status == 200  # (open: no credentials)
            page = await r.text()
        told = [
            said
            for said in (a.framework_id, "secret-merger-model", 'principal="team-a"')
            if said in page
        ]
        assert not told, f"/metrics, open to anybody, names team-a's {told}"
    finally:
        await a.close()


async def test_open_metrics_keep_the_aggregates_and_an_operator_reads_the_whole_page(
    live: Live,
) -> None:
    """(The fix's) the open page still counts frameworks and resources; an operator's
    credentials get the series that name tenants; a framework principal's are refused,
    open flag or not."""
    a = live.scheduler("team-a")
    try:
        assert await a.subscribe(framework_info("team-a")) == 200
        async with aiohttp.ClientSession() as http:
            async with http.get(live.web + "metrics") as r:
                page = await r.text()
            assert "drfmesos_frameworks 1.0" in page
            assert "drfmesos_resources_total" in page
            async with http.get(
                live.web + "metrics", headers={"Authorization": live.auth("ops")}
            ) as r:
                assert r.status == 200
                whole = await r.text()
            assert a.framework_id in whole
            assert 'role="team-a"' in whole
            team = {"Authorization": live.auth("team-b")}
            async with http.get(live.web + "metrics", headers=team) as r:
                assert r.status == 403
    finally:
        await a.close()
