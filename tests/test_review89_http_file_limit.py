"""Review 89: the master's HTTP side under systemd's default soft open-file limit.

8a6c2f5 bounds HTTP connections in all by the soft open-file limit less 256: under
systemd's 1,024 (its soft default, kept low for select(), which asyncio does not use; the
hard one is 524,288) that is 768 connections for everyone, which 384 Mesos HTTP
frameworks (a SUBSCRIBE stream and a call connection each) fill: the next framework and
the operator's page were refused. The slave lifts its soft limit to the hard one
(slave/cli.py); the master now does too as its HTTP side starts, and bounds by that.
"""

from __future__ import annotations

import resource
from collections.abc import Iterator

import pytest
from aiohttp import web

from master.http.connections import FILES_KEPT, BoundedSite
from protocol import logs

from harness.helpers import door_from

SOFT_LIMIT = 1024  # systemd's default soft limit


@pytest.fixture
def soft_file_limit() -> Iterator[int]:
    """This process may open SOFT_LIMIT files (a service's default); its hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2 * SOFT_LIMIT:
        pytest.skip(f"a hard open-file limit of {hard}: too low to tell")
    resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT_LIMIT, hard))
    try:
        yield hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_clients_past_768_are_served_when_the_hard_limit_allows(
    soft_file_limit: int,
) -> None:
    runner = web.AppRunner(web.Application())
    await runner.setup()
    site = BoundedSite(runner, "127.0.0.1", 0, log=logs.get("review89"))
    await site.start()
    try:
        assert site.doorman is not None
        frameworks = 400  # from addresses of their own, two connections each
        admitted = [
            site.doorman.admit(door_from(site.doorman, f"198.51.{n // 250}.{n % 250}"))
            for n in range(2 * frameworks)
        ]
        assert all(admitted), f"{admitted.count(False)} refused"
        if soft_file_limit != resource.RLIM_INFINITY:
            assert site.doorman.most == soft_file_limit - FILES_KEPT
    finally:
        await runner.cleanup()
