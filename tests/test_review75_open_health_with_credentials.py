"""Review 75: with `--http-open-metrics`, /health asked with a tenant's credentials is
refused (403), or with a stale secret (401), where it was answered before today.

`--http-open-metrics` "leaves /metrics and /health open for scrapers" (and probes). Since
edc82c6 (review 72 #8) a request that carries an Authorization header is no longer open:
it is checked, and a framework principal is refused at every path but its files and
why-no-offers, /health among them. /health names no tenant (it says whether this master
is up and leads): what the flag opened for anybody is now shut for a tenant's own
monitoring that sends its credentials with every request (a Prometheus blackbox or a
load balancer's probe configured once for the cluster), and for a probe whose secret was
rotated. Mesos serves /health to anybody, whatever the request carries.

What a user of the flag relies on: /health answers 200 to anybody who can reach it.
"""

from __future__ import annotations

import aiohttp
from test_review72_open_metrics import live  # noqa: F401  (the fixture: the flag on)

from harness.mesos import Live


async def test_open_health_answers_a_probe_that_sends_credentials(live: Live) -> None:  # noqa: F811
    async with aiohttp.ClientSession() as http:
        async with http.get(live.web + "health") as r:
            assert r.status == 200  # (open: no credentials)
        for who, auth in (
            ("team-a's credentials", live.auth("team-a")),
            ("a stale secret", "Basic " + "dGVhbS1hOm9sZA=="),  # team-a:old
        ):
            async with http.get(live.web + "health", headers={"Authorization": auth}) as r:
                assert r.status == 200, f"open /health refused a probe with {who}: {r.status}"
