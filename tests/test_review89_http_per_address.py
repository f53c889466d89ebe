"""Review 89: a master behind a reverse proxy (or with many frameworks on one host) may
let one client address hold more than 512 HTTP connections.

8a6c2f5 bounds the connections of one client address at 512, fixed. Behind nginx or a
load balancer every client is the proxy's address, and each Mesos HTTP framework holds a
SUBSCRIBE stream open for as long as it runs, beside its calls' connection: the 257th
framework through the proxy, and the operator's page with it, were refused, with no way
for the operator to raise the bound but editing the code. `--http-connections-per-address`
(HttpConfig.connections_per_address) now sets it; 512 stays the default.
"""

from __future__ import annotations

from aiohttp import web
from click.testing import CliRunner

from master.cli import master as master_command
from master.http.config import HttpConfig
from master.http.connections import CONNECTIONS_PER_ADDRESS, BoundedSite
from master.http.responses import serve_site
from protocol import logs

from harness.helpers import door_from


async def test_one_proxy_holds_the_connections_its_operator_allows() -> None:
    runner = web.AppRunner(web.Application())
    config = HttpConfig(port=0, connections_per_address=2048)
    await serve_site(runner, config, logs.get("review89"))
    try:
        (site,) = runner.sites
        assert isinstance(site, BoundedSite)
        assert site.doorman is not None
        frameworks = 400  # behind one proxy: a SUBSCRIBE stream and a call each
        admitted = [
            site.doorman.admit(door_from(site.doorman, "127.0.0.1")) for _ in range(2 * frameworks)
        ]
        assert all(admitted), f"{admitted.count(False)} refused"
    finally:
        await runner.cleanup()


def test_the_bound_is_an_option_of_the_master() -> None:
    said = CliRunner().invoke(master_command, ["--help"]).output
    assert "--http-connections-per-address" in said
    assert HttpConfig().connections_per_address == CONNECTIONS_PER_ADDRESS == 512
