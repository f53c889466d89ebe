"""An operator who curls a standby master's /state (or opens its web UI), as a Mesos
operator does any master, is sent to the leader (307, as Mesos's masters not leading do),
not left with a bare 404; while nobody leads, a 503 says so. /health and /metrics stay
the standby's own."""

from __future__ import annotations

import aiohttp

from master.http.config import HttpConfig
from master.http.standby import StandbyHttp
from master.mesos_api.doors import STANDBY_PUBLIC_PATHS, standby_mesos_routes


async def test_a_standby_sends_the_leaders_pages_to_the_leader() -> None:
    leader = "http://127.0.0.1:5999/"

    async def where() -> str:
        return leader

    config = HttpConfig(port=0, credentials=None)
    standby = StandbyHttp(
        config, "master-standby", where, standby_mesos_routes(where), STANDBY_PUBLIC_PATHS
    )
    await standby.start()
    assert standby.runner is not None
    port = next(iter(standby.runner.addresses))[1]
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            for path in ("/state", "/", "/master/state?jsonp=x"):
                async with session.get(base + path, allow_redirects=False) as r:
                    assert r.status == 307
                    assert r.headers["Location"] == "//127.0.0.1:5999" + path
            async with session.get(base + "/health") as r:
                assert r.status == 200
                assert (await r.json())["status"] == "standby"
            async with session.get(base + "/metrics") as r:
                assert r.status == 200
            leader = ""  # between two leaders
            async with session.get(base + "/state", allow_redirects=False) as r:
                assert r.status == 503
                assert "no master leads" in (await r.json())["error"]
    finally:
        await standby.stop()
