"""A Mesos operator's monitoring asks every master's /metrics/snapshot which one leads
(`master/elected`), as Mesos's standbys answer it themselves with 0. A standby sent it on
to the leader (307), so that `curl -L` (and any client following redirects) read the
leader's 1 from every master: three masters, three leaders."""

from __future__ import annotations

import aiohttp

from master.http.config import HttpConfig
from master.http.standby import StandbyHttp
from master.mesos_api.doors import STANDBY_PUBLIC_PATHS, standby_mesos_routes


async def test_a_standby_answers_metrics_snapshot_itself_not_elected() -> None:
    async def where() -> str:
        return "127.0.0.1:5999"

    config = HttpConfig(port=0, credentials=None)
    standby = StandbyHttp(
        config, "master-standby", where, standby_mesos_routes(where), STANDBY_PUBLIC_PATHS
    )
    await standby.start()
    assert standby.runner is not None
    port = next(iter(standby.runner.addresses))[1]
    try:
        async with aiohttp.ClientSession() as session:
            for path in ("/metrics/snapshot", "/metrics/snapshot/"):
                url = f"http://127.0.0.1:{port}{path}"
                async with session.get(url, allow_redirects=False) as r:
                    assert r.status == 200
                    assert (await r.json())["master/elected"] == 0
    finally:
        await standby.stop()
