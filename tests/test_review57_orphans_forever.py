"""Review 57: the master's --max-failover-timeout says "a framework that disconnects holds
its tasks no longer than this" (master/cli.py; `Subscriptions._failover_timeout`: "a
framework that goes away does not hold its tasks, and so its share, for as long as it
likes"). A framework whose tasks came back as orphans -- the master restarted without its
registry, as the README's master runs -- holds them for ever: no timeout runs for an
orphan's framework (master/orphans.py: held "until that framework's principal
subscribes and takes them, an operator tears that framework down, their slave no longer
names them, or their slave is removed"), and what they hold counts in nobody's share.

So a tenant whose framework is orphaned by a restart need only not come back to it: its
tasks run on, on room nobody is charged for, and it subscribes a new framework that is
offered a full share beside them.

In process, on the memory transport with the credentials store's ACL (the fixtures of
tests/test_framework_ids.py, the master's --max-failover-timeout set to 1 s)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from test_framework_ids import TASK, cluster, run_tasks

from protocol.wire.resources import Resources

from harness.fakes import heartbeating, told_to_shut_down
from harness.helpers import eventually

pytestmark = pytest.mark.timeout(60)
MAX_FAILOVER = 1.0  # seconds: the operator's --max-failover-timeout
WAITED = 5.0  # seconds past it that the test waits for the orphans' shutdown


async def test_an_orphaned_framework_holds_its_tasks_no_longer_than_the_most_failover(
    tmp_path: Path,
) -> None:
    """mallory runs 3 tasks, asking a failover timeout of an hour (cut to 1 s). The master
    restarts without its registry; the slave brings her tasks back, orphans; she never
    comes back to that framework. Within the most failover timeout (and WAITED more) the
    slave must be told to shut it down and its room freed, as for any framework gone that
    long: today nothing happens, and her 3 tasks hold 3 CPUs that count to nobody."""
    async with cluster(tmp_path, max_failover_timeout=MAX_FAILOVER) as c:
        mallory = await c.framework("mallory")
        mid = (await mallory.subscribe("m", role="mallory", failover_timeout=3600)).framework_id
        await run_tasks(c, mallory, 3)
        await c.restart_master()
        await c.reregister()
        assert c.master.books.orphans.owners(mid) == {"mallory"}
        assert c.held("sa") == TASK.scaled(3)

        told = told_to_shut_down(c.slave, mid)
        async with heartbeating(c.slave):  # (the slave stays: a live one heartbeats)
            with contextlib.suppress(TimeoutError):
                await c.slave.inbox.wait_until(told, timeout=MAX_FAILOVER + WAITED)
            with contextlib.suppress(AssertionError):  # (freed once the slave says so)
                await eventually(lambda: c.held("sa") == Resources(), timeout=2)
            held = c.held("sa")
        assert held == Resources(), (
            f"{MAX_FAILOVER + WAITED:g} s after the restart mallory's orphaned framework "
            f"{mid} still holds {held} of the slave (counted in nobody's share), with a most "
            f"failover timeout of {MAX_FAILOVER:g} s"
        )
